"""Turn the metric source's canonical server snapshot into the panes' ``ServerView``.

The adapter reads attributes by name so the view does not break when the snapshot grows; a
missing attribute is nan, never 0.
"""

from __future__ import annotations

import math
from typing import Any

from infmon.model.dashboard import ServerView, SpecView

NAN = math.nan


def _num(obj: Any, *names: str) -> float:
    """The first of ``names`` that ``obj`` has as a number (attribute or mapping key), else nan."""
    for name in names:
        value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
        if value is None:
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return NAN


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _mean(obj: Any, *names: str) -> float:
    """A window mean from a histogram summary (an object with ``mean_s``/``mean``) or a number;
    ``ServerSnapshot.latency_s[name]`` first."""
    latency = _get(obj, "latency_s") or {}
    for name in names:
        value = latency.get(name) if isinstance(latency, dict) or hasattr(latency, "get") else None
        if value is None:
            value = _get(obj, name)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        got = _num(value, "mean_s", "mean")
        if not math.isnan(got):
            return got
    return NAN


def spec_view_from(spec: Any) -> SpecView | None:
    if spec is None:
        return None
    positions = _get(spec, "acceptance_per_position") or _get(spec, "per_position_acceptance") or ()
    if isinstance(positions, dict):
        positions = [positions[k] for k in sorted(positions, key=lambda k: int(k))]
    return SpecView(
        acceptance_rate=_num(spec, "acceptance_rate"),
        mean_acceptance_length=_num(spec, "mean_acceptance_length"),
        per_position_acceptance=tuple(float(p) for p in positions if p is not None),
    )


def kv_capacity_seqs(snap: Any, tokens_per_seq: float) -> float:
    """Sequences of ``tokens_per_seq`` that fit in the KV cache (the snapshot's own rule)."""
    method = getattr(snap, "kv_capacity_seqs", None)
    if callable(method) and not math.isnan(tokens_per_seq) and tokens_per_seq > 0:
        got = method(round(tokens_per_seq), 0)
        return NAN if got is None else float(got)
    return _num(snap, "kv_capacity_seqs", "kv_capacity_sequences")


def server_view_from(snap: Any, tokens_per_seq: float = NAN) -> ServerView:
    """Map a canonical ``ServerSnapshot`` (or a dict of the same keys) onto the panes' view;
    ``tokens_per_seq`` (prompt + output of recent requests) sizes the KV capacity in sequences."""
    config = _get(snap, "cache_config") or {}
    if math.isnan(tokens_per_seq):
        tokens_per_seq = _num(snap, "tokens_per_seq", "kv_tokens_per_seq")
    return ServerView(
        has_data=True,
        running=_num(snap, "running"),
        max_num_seqs=_num(snap, "max_num_seqs")
        if not math.isnan(_num(snap, "max_num_seqs"))
        else _num(config, "max_num_seqs"),
        waiting=_num(snap, "waiting"),
        kv_usage_fraction=_num(snap, "kv_cache_usage", "kv_usage_fraction"),
        kv_capacity_tokens=_num(snap, "kv_capacity_tokens"),
        kv_capacity_seqs=kv_capacity_seqs(snap, tokens_per_seq),
        tokens_per_seq=tokens_per_seq,
        preemptions_per_s=_num(snap, "preemptions_per_s"),
        prefix_hit_rate=_num(snap, "prefix_cache_hit_rate", "prefix_hit_rate"),
        queue_s=_mean(snap, "queue", "queue_time", "queue_s"),
        prefill_s=_mean(snap, "prefill", "prefill_time", "prefill_s"),
        decode_s=_mean(snap, "decode", "decode_time", "decode_s"),
        generation_tokens_per_s=_num(snap, "generation_tokens_per_s"),
        spec=spec_view_from(_get(snap, "spec_decode")),
    )
