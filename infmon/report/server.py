"""The server's side of a report: configuration, memory budget, per-step aggregates."""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from typing import Any

CONFIG_KEYS = (
    "backend",
    "backend_version",
    "models",
    "max_model_len",
    "kv_capacity_tokens",
    "kv_block_size_tokens",
    "kv_num_gpu_blocks",
    "cache_config",
)
SERIES = (
    "kv_usage",
    "running",
    "waiting",
    "preemptions_per_s",
    "gen_tok_s",
    "acceptance_rate",
    "mean_acceptance_length",
)


def server_config(scrapes: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The latest known value of each configuration field across the scrapes."""
    cfg: dict[str, Any] = {}
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
    cache = cfg.get("cache_config") or {}
    if "cache_dtype" in cache:
        cfg["cache_dtype"] = cache["cache_dtype"]
    cfg["restarts_seen"] = restarts
    return cfg


def memory_budget(
    cfg: dict[str, Any], prompt_tokens: float, output_tokens: float
) -> dict[str, Any] | None:
    """KV capacity in tokens and in whole sequences of the session's mean length."""
    cap = cfg.get("kv_capacity_tokens")
    if cap is None:
        return None
    per_seq = prompt_tokens + output_tokens
    seqs = None
    if per_seq > 0 and not math.isnan(per_seq):
        bs, blocks = cfg.get("kv_block_size_tokens"), cfg.get("kv_num_gpu_blocks")
        seqs = blocks // math.ceil(per_seq / bs) if bs and blocks else int(cap // per_seq)
    return {
        "kv_capacity_tokens": cap,
        "tokens_per_seq": per_seq if per_seq > 0 else None,
        "kv_capacity_seqs": seqs,
    }


class ServerSeries:
    """Server timeline points sorted by time, with window aggregates for steps."""

    def __init__(self, points: list[dict[str, Any]]) -> None:
        self.points = sorted(points, key=lambda p: p["t_s"])
        self._t = [p["t_s"] for p in self.points]

    def window(self, start_s: float, end_s: float) -> dict[str, Any]:
        """Mean and max of each series between two session-relative times."""
        lo, hi = bisect.bisect_left(self._t, start_s), bisect.bisect_right(self._t, end_s)
        out: dict[str, Any] = {}
        for key in SERIES:
            vals = [p[key] for p in self.points[lo:hi] if isinstance(p.get(key), (int, float))]
            vals = [v for v in vals if not math.isnan(v)]
            out[f"{key}_mean"] = sum(vals) / len(vals) if vals else None
            out[f"{key}_max"] = max(vals) if vals else None
        out["scrapes"] = hi - lo
        out["prefix_hit_rate"] = self._prefix_hit_rate(max(0, lo - 1), hi + 1)
        return out

    def _prefix_hit_rate(self, lo: int, hi: int) -> float | None:
        """Δhits / Δqueries of the prefix cache from the scrape before the window to the one
        after it (vLLM's definition); None when unknown or the counters went back (a restart)."""
        pts = [
            (p["prefix_hits_total"], p["prefix_queries_total"])
            for p in self.points[lo:hi]
            if isinstance(p.get("prefix_hits_total"), (int, float))
            and isinstance(p.get("prefix_queries_total"), (int, float))
        ]
        if len(pts) < 2:
            return None
        hits, queries = pts[-1][0] - pts[0][0], pts[-1][1] - pts[0][1]
        if hits < 0 or queries <= 0:
            return None
        return float(hits / queries)
