"""Over-time series built a step of columns at a time: 1 s bins, merged down for charts.

Client series bin each request at its completion; server series come from the scrapes.
Memory is one small accumulator per second of session, whatever the request rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from infmon.model.records.columns import RecordColumns
from infmon.report.doc import ClientPoint, JournalLine, ServerPoint

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
    tpot_sum_s: float = 0.0
    tpot_n: int = 0


@dataclass
class ClientTimeline:
    """Per-second throughput and mean latency of completed requests."""

    origin_s: float
    bins: dict[int, _Bin] = field(default_factory=dict)

    def add(self, cols: RecordColumns) -> None:
        """Bin a step's records at their completion (last chunk, else end, else send time)."""
        if not len(cols):
            return
        end = np.where(cols.chunks > 0, cols.last_chunk_s, cols.end_s)
        end = np.where(np.isnan(end), cols.sent_s, end)
        second = np.trunc(end - self.origin_s).astype(np.int64)
        keys, where = np.unique(second, return_inverse=True)
        ok, has = cols.ok, cols.ok & (cols.chunks > 0)
        ttft, e2el = np.where(has, cols.ttft_s, 0.0), np.where(has, cols.e2el_s, 0.0)
        tpot_all = cols.tpot_s
        has_tpot = ok & np.isfinite(tpot_all)
        tpot = np.where(has_tpot, tpot_all, 0.0)
        sums = [
            np.bincount(where, weights=w, minlength=keys.size)
            for w in (
                ok,
                ~ok,
                np.where(ok, cols.output_token_count, 0),
                ttft,
                has,
                e2el,
                tpot,
                has_tpot,
            )
        ]
        for i, key in enumerate(keys.tolist()):
            b = self.bins.setdefault(key, _Bin())
            b.completed += int(sums[0][i])
            b.failed += int(sums[1][i])
            b.ttft_sum_s += float(sums[3][i])
            b.ttft_n += int(sums[4][i])
            b.e2el_sum_s += float(sums[5][i])
            b.e2el_n += int(sums[4][i])
            b.tpot_sum_s += float(sums[6][i])
            b.tpot_n += int(sums[7][i])
            if cols.chunk_us is None:
                b.output_tokens += int(sums[2][i])
        if cols.chunk_us is not None:
            self._tokens_by_chunk(cols)

    def _tokens_by_chunk(self, cols: RecordColumns) -> None:
        """Output tokens in the second their chunks arrived (a request's tokens are not all
        counted at its end: the client's line follows the server's)."""
        if not int(cols.chunks.sum()):
            return
        per = np.where(cols.ok, cols.output_token_count / np.maximum(cols.chunks, 1), 0.0)
        weights = np.repeat(per, cols.chunks)
        second = np.trunc(cols.chunk_times_s() - self.origin_s).astype(np.int64)
        keys, where = np.unique(second, return_inverse=True)
        sums = np.bincount(where, weights=weights, minlength=keys.size)
        for key, tokens in zip(keys.tolist(), sums.tolist(), strict=True):
            self.bins.setdefault(key, _Bin()).output_tokens += round(tokens)

    def series(self, max_points: int = MAX_POINTS) -> list[ClientPoint]:
        """One point per ``max_points``-th of the session (1 s bins merged)."""
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
                merged.tpot_sum_s += b.tpot_sum_s
                merged.tpot_n += b.tpot_n
            out.append(_point(start, width, merged))
        return out


def _point(start: int, width: int, b: _Bin) -> ClientPoint:
    return {
        "t_s": float(start + width / 2),
        "out_tok_s": b.output_tokens / width,
        "req_s": b.completed / width,
        "failed": b.failed,
        "ttft_ms_mean": 1e3 * b.ttft_sum_s / b.ttft_n if b.ttft_n else None,
        "tpot_ms_mean": 1e3 * b.tpot_sum_s / b.tpot_n if b.tpot_n else None,
        "e2el_ms_mean": 1e3 * b.e2el_sum_s / b.e2el_n if b.e2el_n else None,
    }


def server_point(scrape: JournalLine, origin_s: float) -> ServerPoint | None:
    """One server-timeline point from a journal scrape line, or None when it holds nothing.
    ``scrape`` is the journal's line: ``{"t", "snap"}``, the snapshot as
    ``ServerSnapshot.to_dict()`` wrote it (whose values the point carries)."""
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


_Point = TypeVar("_Point")


def thin(points: list[_Point], max_points: int = MAX_POINTS) -> list[_Point]:
    """Every n-th point so that at most ``max_points`` remain (server series are 1/s)."""
    if len(points) <= max_points:
        return points
    step = math.ceil(len(points) / max_points)
    return points[::step]
