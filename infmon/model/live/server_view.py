"""The canonical ``ServerSnapshot`` as the panes' ``ServerView`` (typed; unknown stays nan)."""

from __future__ import annotations

import math

from infmon.model.live.dashboard import EndpointRow, ServerView, SpecView
from infmon.model.server.families import detail_view
from infmon.model.server.snapshot import EngineSnapshot, ServerSnapshot, SpecDecode
from infmon.model.steps.kv_fill import kv_fill_concurrency, sequence_tokens

NAN = math.nan
MAX_ROWS = 64
"""Rows kept for the pane (a fleet of hundreds of pods is summed; the first 64 are listed)."""


def _f(x: float | int | None) -> float:
    return NAN if x is None else float(x)


def _mean(snap: ServerSnapshot, name: str) -> float:
    stat = snap.latency_s.get(name)
    return _f(stat.mean) if stat is not None else NAN


def spec_view_from(spec: SpecDecode | None) -> SpecView | None:
    if spec is None:
        return None
    return SpecView(
        acceptance_rate=_f(spec.acceptance_rate),
        mean_acceptance_length=_f(spec.mean_acceptance_length),
        per_position_acceptance=tuple(float(p) for p in spec.acceptance_per_position),
    )


def kv_capacity_seqs(snap: ServerSnapshot, tokens_per_seq: float) -> float:
    """Sequences of ``tokens_per_seq`` that fit in the KV cache (``kv_fill_concurrency``: the
    knee pane's and the report's figure)."""
    return kv_fill_concurrency(
        _f(snap.kv_num_gpu_blocks),
        _f(snap.kv_block_size_tokens),
        _f(snap.kv_capacity_tokens),
        tokens_per_seq,
    )


def row_name(labels: tuple[tuple[str, str], ...]) -> str:
    """``pod=vllm-0`` → ``vllm-0``; ``engine=1`` → ``engine 1``; the model label left out."""
    parts = [f"engine {v}" if k == "engine" else v for k, v in labels if k != "model_name"]
    return " ".join(parts) or ",".join(v for _, v in labels) or "all"


def endpoint_rows(engines: tuple[EngineSnapshot, ...]) -> tuple[EndpointRow, ...]:
    """A row per engine label set when there are several (one server is its own sum)."""
    if len(engines) < 2:
        return ()
    return tuple(
        EndpointRow(
            name=row_name(e.labels),
            running=_f(e.running),
            waiting=_f(e.waiting),
            kv_usage_fraction=_f(e.kv_cache_usage),
            generation_tokens_per_s=_f(e.generation_tokens_per_s),
            role=e.pd_role,
        )
        for e in engines[:MAX_ROWS]
    )


def server_view_from(snap: ServerSnapshot, tokens_per_seq: float = NAN) -> ServerView:
    """``tokens_per_seq`` (prompt + output of recent requests) sizes the KV capacity in
    sequences; ``max_num_seqs`` is not published (see ``ServerState``)."""
    return ServerView(
        has_data=True,
        running=_f(snap.running),
        waiting=_f(snap.waiting),
        kv_usage_fraction=_f(snap.kv_cache_usage),
        kv_capacity_tokens=_f(snap.kv_capacity_tokens),
        kv_capacity_seqs=kv_capacity_seqs(snap, tokens_per_seq),
        tokens_per_seq=sequence_tokens(tokens_per_seq),
        preemptions_per_s=_f(snap.preemptions_per_s),
        prefix_hit_rate=_f(snap.prefix_cache_hit_rate),
        queue_s=_mean(snap, "queue"),
        prefill_s=_mean(snap, "prefill"),
        decode_s=_mean(snap, "decode"),
        generation_tokens_per_s=_f(snap.generation_tokens_per_s),
        api_cpu_cores=_f(snap.api_server_cpu_cores),
        spec=spec_view_from(snap.spec_decode),
        rows=endpoint_rows(snap.engines),
        detail=detail_view(snap.detail, snap.waiting),
    )
