"""Over-time series built in one streaming pass: 1 s bins, merged down for charts.

Client series bin each request at its completion; server series come from the scrapes.
Memory is one small accumulator per second of session, whatever the request rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from infmon.model.records import RequestRecord

MAX_POINTS = 600


@dataclass
class _Bin:
    completed: int = 0
    failed: int = 0
    output_tokens: int = 0
    ttft_sum_s: float = 0.0
    ttft_n: int = 0
    e2el_sum_s: float = 0.0
    e2el_n: int = 0


@dataclass
class ClientTimeline:
    """Per-second throughput and mean latency of completed requests."""

    origin_s: float
    bins: dict[int, _Bin] = field(default_factory=dict)

    def add(self, r: RequestRecord) -> None:
        end = r.chunk_times_s[-1] if r.chunk_times_s else r.end_s
        if math.isnan(end):
            end = r.sent_s
        b = self.bins.setdefault(int(end - self.origin_s), _Bin())
        if not r.ok:
            b.failed += 1
            return
        b.completed += 1
        b.output_tokens += r.output_token_count
        if r.chunk_times_s:
            b.ttft_sum_s += r.ttft_s
            b.ttft_n += 1
            b.e2el_sum_s += r.e2el_s
            b.e2el_n += 1

    def series(self, max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
        """Points ``{t_s, out_tok_s, req_s, failed, ttft_ms_mean, e2el_ms_mean}``."""
        if not self.bins:
            return []
        first, last = min(self.bins), max(self.bins)
        width = max(1, math.ceil((last - first + 1) / max_points))
        out = []
        for start in range(first, last + 1, width):
            merged = _Bin()
            for sec in range(start, min(start + width, last + 1)):
                b = self.bins.get(sec)
                if b is None:
                    continue
                merged.completed += b.completed
                merged.failed += b.failed
                merged.output_tokens += b.output_tokens
                merged.ttft_sum_s += b.ttft_sum_s
                merged.ttft_n += b.ttft_n
                merged.e2el_sum_s += b.e2el_sum_s
                merged.e2el_n += b.e2el_n
            out.append(_point(start, width, merged))
        return out


def _point(start: int, width: int, b: _Bin) -> dict[str, Any]:
    return {
        "t_s": float(start + width / 2),
        "out_tok_s": b.output_tokens / width,
        "req_s": b.completed / width,
        "failed": b.failed,
        "ttft_ms_mean": 1e3 * b.ttft_sum_s / b.ttft_n if b.ttft_n else None,
        "e2el_ms_mean": 1e3 * b.e2el_sum_s / b.e2el_n if b.e2el_n else None,
    }


def server_point(scrape: dict[str, Any], origin_s: float) -> dict[str, Any] | None:
    """One server-timeline point from a journal scrape line, or None when it holds nothing."""
    snap = scrape.get("snap") or {}
    t = scrape.get("t")
    if not isinstance(t, (int, float)) or snap.get("state", "ok") != "ok":
        return None
    spec = snap.get("spec_decode") or {}
    return {
        "t_s": float(t) - origin_s,
        "kv_usage": snap.get("kv_cache_usage"),
        "running": snap.get("running"),
        "waiting": snap.get("waiting"),
        "preemptions_per_s": snap.get("preemptions_per_s"),
        "gen_tok_s": snap.get("generation_tokens_per_s"),
        "acceptance_rate": spec.get("acceptance_rate"),
        "mean_acceptance_length": spec.get("mean_acceptance_length"),
        "prefix_hits_total": snap.get("prefix_cache_hits_total"),
        "prefix_queries_total": snap.get("prefix_cache_queries_total"),
    }


def thin(points: list[dict[str, Any]], max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """Every n-th point so that at most ``max_points`` remain (server series are 1/s)."""
    if len(points) <= max_points:
        return points
    step = math.ceil(len(points) / max_points)
    return points[::step]
