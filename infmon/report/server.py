"""The server's side of a report: configuration, memory budget, per-step aggregates."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from typing import cast

from infmon.model.base.jsontypes import JSON
from infmon.model.steps.kv_fill import kv_fill_concurrency, sequence_tokens
from infmon.report.doc import JournalLine, MemoryBudget, ServerConfig, ServerPoint, ServerWindow

CONFIG_KEYS = (
    "backend",
    "backend_version",
    "models",
    "max_model_len",
    "kv_capacity_tokens",
    "kv_block_size_tokens",
    "kv_num_gpu_blocks",
    "cache_config",
    "spec_config",
)


def server_config(scrapes: Iterable[JournalLine]) -> ServerConfig:
    """The latest known value of each configuration field across the scrapes (journal lines
    ``{"t", "snap"}``, the snapshot as ``ServerSnapshot.to_dict()`` wrote it)."""
    cfg: dict[str, JSON] = {}  # CONFIG_KEYS with the snapshot's values: ServerConfig's own
    restarts = 0
    for s in scrapes:
        snap = s.get("snap") or {}
        restarts += bool(snap.get("server_restarted"))
        for key in CONFIG_KEYS:
            if snap.get(key) not in (None, [], {}):
                cfg[key] = snap[key]
        spec = snap.get("spec_decode") or {}
        per_pos = spec.get("acceptance_per_position") or []
        if per_pos:
            cfg["spec_decode_positions"] = len(per_pos)
    cache = cfg.get("cache_config")
    if isinstance(cache, Mapping) and "cache_dtype" in cache:
        cfg["cache_dtype"] = cache["cache_dtype"]
    cfg["restarts_seen"] = restarts
    return cast(ServerConfig, cfg)


def memory_budget(
    cfg: ServerConfig, prompt_tokens: float, output_tokens: float
) -> MemoryBudget | None:
    """KV capacity in tokens and in whole sequences of the session's mean length."""
    cap = cfg.get("kv_capacity_tokens")
    if cap is None:
        return None
    per_seq = sequence_tokens(prompt_tokens + output_tokens)  # the live panes' one rounding
    bs, blocks = cfg.get("kv_block_size_tokens"), cfg.get("kv_num_gpu_blocks")
    seqs = kv_fill_concurrency(
        float(blocks) if blocks else math.nan, float(bs) if bs else math.nan, cap, per_seq
    )
    return {
        "kv_capacity_tokens": cap,
        "tokens_per_seq": None if math.isnan(per_seq) else int(per_seq),
        "kv_capacity_seqs": None if math.isnan(seqs) else int(seqs),
    }


class ServerSeries:
    """Server timeline points sorted by time, with window aggregates for steps."""

    def __init__(self, points: list[ServerPoint]) -> None:
        self.points = sorted(points, key=lambda p: p["t_s"])
        self._t = [p["t_s"] for p in self.points]

    def window(self, start_s: float, end_s: float) -> ServerWindow:
        """Mean and max of each series between two session-relative times."""
        lo, hi = bisect.bisect_left(self._t, start_s), bisect.bisect_right(self._t, end_s)
        pts = self.points[lo:hi]
        kv, running, waiting = (
            _mean_max(pts, "kv_usage"),
            _mean_max(pts, "running"),
            _mean_max(pts, "waiting"),
        )
        pre, gen = _mean_max(pts, "preemptions_per_s"), _mean_max(pts, "gen_tok_s")
        acc, length = _mean_max(pts, "acceptance_rate"), _mean_max(pts, "mean_acceptance_length")
        return {
            "kv_usage_mean": kv[0],
            "kv_usage_max": kv[1],
            "running_mean": running[0],
            "running_max": running[1],
            "waiting_mean": waiting[0],
            "waiting_max": waiting[1],
            "preemptions_per_s_mean": pre[0],
            "preemptions_per_s_max": pre[1],
            "gen_tok_s_mean": gen[0],
            "gen_tok_s_max": gen[1],
            "acceptance_rate_mean": acc[0],
            "acceptance_rate_max": acc[1],
            "mean_acceptance_length_mean": length[0],
            "mean_acceptance_length_max": length[1],
            "scrapes": hi - lo,
            "prefix_hit_rate": self._prefix_hit_rate(max(0, lo - 1), hi + 1),
        }

    def _prefix_hit_rate(self, lo: int, hi: int) -> float | None:
        """Δhits / Δqueries of the prefix cache from the scrape before the window to the one
        after it (vLLM's definition); None when unknown or the counters went back (a restart)."""
        pts = [
            (h, q)
            for p in self.points[lo:hi]
            if isinstance(h := p["prefix_hits_total"], (int, float))
            and isinstance(q := p["prefix_queries_total"], (int, float))
        ]
        if len(pts) < 2:
            return None
        hits, queries = pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]
        if hits < 0 or queries <= 0:
            return None
        return float(hits / queries)


def _mean_max(points: list[ServerPoint], key: str) -> tuple[float | None, float | None]:
    """Mean and max of one series over ``points`` (None when it has no number there)."""
    vals = [v for p in points if isinstance(v := p.get(key), (int, float)) and not math.isnan(v)]
    return (sum(vals) / len(vals) if vals else None), (max(vals) if vals else None)
