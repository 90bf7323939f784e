"""The canonical, backend-independent view of an inference server's own metrics.

Every source (a direct ``/metrics`` page, two saved pages, a Prometheus server) produces one
``ServerSnapshot``. A value the server does not expose is ``None`` (unknown), never 0, so a pane
can show "—" instead of a lie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TypedDict

from infmon.model.server.families import ServerDetail, ServerDetailDict
from infmon.model.server.gpu import GpuDict, GpuSnapshot

SCHEMA_VERSION = 1
"""Bumped whenever a key of ``ServerSnapshot.to_dict()`` changes meaning or disappears."""

LATENCY_NAMES = ("queue", "prefill", "decode", "ttft", "itl", "tpot", "e2e")
"""The latency histograms a snapshot summarises (seconds), in display order."""


class SourceState:
    """How the source fared on its last attempt (errors are data)."""

    OK = "ok"
    STALE = "stale"
    """The last scrape failed; values are from an earlier success."""
    DOWN = "down"
    """No successful scrape yet, or failing for longer than the stale limit."""
    NO_METRICS = "no_metrics"
    """The server answers but has no ``/metrics`` (404): not an error, nothing to show."""


class WindowStatDict(TypedDict):
    count: float | None
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None


class SpecDecodeDict(TypedDict):
    drafts_total: float | None
    draft_tokens_total: float | None
    accepted_tokens_total: float | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    accepted_per_position_total: list[float]
    acceptance_per_position: list[float]


class _EngineFigures(TypedDict):
    labels: dict[str, str]
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    preemptions_total: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    kv_capacity_tokens: int | None
    gpus: list[str]


class EngineDict(_EngineFigures, total=False):
    """``EngineSnapshot.to_dict()``; ``pd_role`` is not in journals from before it (a base
    class and ``total=False`` rather than ``NotRequired``, which Python 3.10 lacks)."""

    pd_role: str | None


class ServerSnapshotDict(ServerDetailDict):
    """``ServerSnapshot.to_dict()``: the keys of ``infmon scrape --json`` (and the journal's
    scrapes), ``ServerDetail``'s after its own."""

    timestamp_s: float
    backend: str | None
    backend_version: str | None
    schema_version: int
    state: str
    error_kind: str | None
    error_message: str | None
    server_restarted: bool
    window_s: float | None
    models: list[str]
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    prefix_cache_hit_rate: float | None
    prefix_cache_hits_total: float | None
    prefix_cache_queries_total: float | None
    preemptions_total: float | None
    preemptions_per_s: float | None
    api_server_cpu_s_total: float | None
    api_server_cpu_cores: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    requests_finished_total: dict[str, float]
    requests_finished_per_s: float | None
    latency_s: dict[str, WindowStatDict]
    iteration_tokens: WindowStatDict | None
    spec_decode: SpecDecodeDict | None
    cache_config: dict[str, str]
    spec_config: dict[str, str]
    max_model_len: int | None
    kv_capacity_tokens: int | None
    kv_block_size_tokens: int | None
    kv_num_gpu_blocks: int | None
    engines: list[EngineDict]
    gpus: list[GpuDict]
    gpu_source: str | None
    gpu_note: str | None


@dataclass(frozen=True, slots=True)
class WindowStat:
    """Mean and quantiles of one histogram over a window (or since start, from one page)."""

    count: float | None = None
    """Observations in the window."""
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p50_low: float | None = None
    p50_high: float | None = None
    """The bucket p50 was interpolated in (its bounds), when read from buckets: a p50 far
    above the mean is that interpolation, not the observations."""

    def to_dict(self) -> WindowStatDict:
        return {
            "count": self.count,
            "mean": self.mean,
            "p50": self.p50,
            "p90": self.p90,
            "p99": self.p99,
        }


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """Speculative decoding counters and vLLM's derived ratios (DESIGN.md section 5)."""

    drafts_total: float | None = None
    draft_tokens_total: float | None = None
    accepted_tokens_total: float | None = None
    acceptance_rate: float | None = None
    """Accepted / draft tokens (window when two scrapes, else since start)."""
    mean_acceptance_length: float | None = None
    """1 + accepted / drafts."""
    accepted_per_position_total: tuple[float, ...] = ()
    acceptance_per_position: tuple[float, ...] = ()
    """Accepted at position i / drafts, i = 0 … k-1."""

    def to_dict(self) -> SpecDecodeDict:
        return {
            "drafts_total": self.drafts_total,
            "draft_tokens_total": self.draft_tokens_total,
            "accepted_tokens_total": self.accepted_tokens_total,
            "acceptance_rate": self.acceptance_rate,
            "mean_acceptance_length": self.mean_acceptance_length,
            "accepted_per_position_total": list(self.accepted_per_position_total),
            "acceptance_per_position": list(self.acceptance_per_position),
        }


@dataclass(frozen=True, slots=True)
class EngineSnapshot:
    """The values of one engine / model / pod label set (one row of a per-label table)."""

    labels: tuple[tuple[str, str], ...]
    """The identifying labels, e.g. (("engine", "0"), ("model_name", "m")) or (("pod", "p"),)."""
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    preemptions_total: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    kv_capacity_tokens: int | None = None
    gpus: tuple[str, ...] = ()
    """Indexes of the GPUs (or MIG instances) this pod runs on, from the DCGM join."""
    pd_role: str | None = None
    """``prefill`` or ``decode`` in a disaggregated deployment (``families.pd_role``)."""

    @property
    def key(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.labels) or "all"

    def to_dict(self) -> EngineDict:
        return {
            "labels": dict(self.labels),
            "running": self.running,
            "waiting": self.waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "preemptions_total": self.preemptions_total,
            "prompt_tokens_per_s": self.prompt_tokens_per_s,
            "generation_tokens_per_s": self.generation_tokens_per_s,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "gpus": list(self.gpus),
            "pd_role": self.pd_role,
        }


@dataclass(frozen=True)
class ServerSnapshot:
    """Everything infmon knows about the server at one moment. Unknown is None, never 0."""

    timestamp_s: float
    """Injected-clock time of the scrape (perf_counter scale)."""
    backend: str | None = None
    """``vllm-v1``, ``vllm-v0``, ``sglang``, ``tgi``, ``llamacpp``, ``dcgm`` or None."""
    backend_version: str | None = None
    """A version or era guessed from the names on the page (``/version`` when reachable)."""
    schema_version: int = SCHEMA_VERSION
    models: tuple[str, ...] = ()
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    """KV-cache usage as a fraction 0–1."""
    prefix_cache_hit_rate: float | None = None
    """Hits / queries over the window (two scrapes), else since start, else the server's gauge."""
    prefix_cache_hits_total: float | None = None
    prefix_cache_queries_total: float | None = None
    preemptions_total: float | None = None
    preemptions_per_s: float | None = None
    api_server_cpu_s_total: float | None = None
    """CPU seconds of the process that answered ``/metrics`` (``process_cpu_seconds_total``):
    vLLM's and SGLang's API server, which parses, tokenises, detokenises and streams every
    token in one Python process apart from the engine core's."""
    api_server_cpu_cores: float | None = None
    """That process's CPU over the window, in cores: near 1.0 its one event loop is the limit
    (vLLM's ``--api-server-count`` runs more of them)."""
    prompt_tokens_total: float | None = None
    generation_tokens_total: float | None = None
    prompt_tokens_per_s: float | None = None
    generation_tokens_per_s: float | None = None
    requests_finished_total: Mapping[str, float] = field(default_factory=dict)
    """Finished requests by reason (``stop``, ``length``, ``abort`` …); ``all`` when unlabelled."""
    requests_finished_per_s: float | None = None
    latency_s: Mapping[str, WindowStat] = field(default_factory=dict)
    """Window statistics keyed by ``LATENCY_NAMES``; missing key = the server has no histogram."""
    iteration_tokens: WindowStat | None = None
    """Tokens per engine step (batch size), from ``vllm:iteration_tokens_total``."""
    spec_decode: SpecDecode | None = None
    cache_config: Mapping[str, str] = field(default_factory=dict)
    spec_config: Mapping[str, str] = field(default_factory=dict)
    """A ``speculative_config_info`` gauge's labels (method, drafter model), when published."""
    max_model_len: int | None = None
    kv_capacity_tokens: int | None = None
    kv_block_size_tokens: int | None = None
    kv_num_gpu_blocks: int | None = None
    engines: tuple[EngineSnapshot, ...] = ()
    gpus: tuple[GpuSnapshot, ...] = ()
    gpu_source: str | None = None
    """Where the GPUs come from when a GPU source was asked for (``nvml``, a DCGM URL)."""
    gpu_note: str | None = None
    """Why there are no GPUs from that source (quiet: "no GPU data: …"), else None."""
    window_s: float | None = None
    """Length of the window behind rates and window stats; None = a single page (since start)."""
    state: str = SourceState.OK
    error_kind: str | None = None
    error_message: str | None = None
    server_restarted: bool = False
    """A counter went down between the two scrapes behind this snapshot."""
    detail: ServerDetail = field(default_factory=ServerDetail)
    """The 2025–26 vLLM families (waiting by reason, prompt tokens by source, KV offload …)."""

    @property
    def ok(self) -> bool:
        return self.state == SourceState.OK

    def kv_capacity_seqs(self, prompt_tokens: int, output_tokens: int) -> float | None:
        """How many sequences of ``prompt + output`` tokens fit in the KV cache at once.

        Counts whole blocks per sequence when the block size is known (as vLLM allocates).
        """
        per_seq = prompt_tokens + output_tokens
        if per_seq <= 0 or self.kv_capacity_tokens is None:
            return None
        bs, blocks = self.kv_block_size_tokens, self.kv_num_gpu_blocks
        if bs and blocks:
            return float(blocks // math.ceil(per_seq / bs))
        return self.kv_capacity_tokens / per_seq

    def to_dict(self) -> ServerSnapshotDict:
        """A JSON-ready dict (the keys of ``infmon scrape --json``)."""
        return {
            "timestamp_s": self.timestamp_s,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "schema_version": self.schema_version,
            "state": self.state,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
            "server_restarted": self.server_restarted,
            "window_s": self.window_s,
            "models": list(self.models),
            "running": self.running,
            "waiting": self.waiting,
            "kv_cache_usage": self.kv_cache_usage,
            "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "prefix_cache_hits_total": self.prefix_cache_hits_total,
            "prefix_cache_queries_total": self.prefix_cache_queries_total,
            "preemptions_total": self.preemptions_total,
            "preemptions_per_s": self.preemptions_per_s,
            "api_server_cpu_s_total": self.api_server_cpu_s_total,
            "api_server_cpu_cores": self.api_server_cpu_cores,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "prompt_tokens_per_s": self.prompt_tokens_per_s,
            "generation_tokens_per_s": self.generation_tokens_per_s,
            "requests_finished_total": dict(self.requests_finished_total),
            "requests_finished_per_s": self.requests_finished_per_s,
            "latency_s": {k: v.to_dict() for k, v in self.latency_s.items()},
            "iteration_tokens": self.iteration_tokens.to_dict() if self.iteration_tokens else None,
            "spec_decode": self.spec_decode.to_dict() if self.spec_decode else None,
            "cache_config": dict(self.cache_config),
            "spec_config": dict(self.spec_config),
            "max_model_len": self.max_model_len,
            "kv_capacity_tokens": self.kv_capacity_tokens,
            "kv_block_size_tokens": self.kv_block_size_tokens,
            "kv_num_gpu_blocks": self.kv_num_gpu_blocks,
            "engines": [e.to_dict() for e in self.engines],
            "gpus": [g.to_dict() for g in self.gpus],
            "gpu_source": self.gpu_source,
            "gpu_note": self.gpu_note,
            **self.detail.to_dict(),
        }


def unavailable(
    timestamp_s: float,
    state: str,
    error_kind: str | None = None,
    error_message: str | None = None,
    last: ServerSnapshot | None = None,
) -> ServerSnapshot:
    """A snapshot saying the source is stale / down / has no metrics, keeping the last values."""
    if last is not None and state == SourceState.STALE:
        return replace(
            last,
            timestamp_s=timestamp_s,
            state=state,
            error_kind=error_kind,
            error_message=error_message,
            server_restarted=False,
        )
    return ServerSnapshot(
        timestamp_s=timestamp_s, state=state, error_kind=error_kind, error_message=error_message
    )
