"""The canonical, backend-independent view of an inference server's own metrics.

Every source (a direct ``/metrics`` page, two saved pages, a Prometheus server) produces one
``ServerSnapshot``. A value the server does not expose is ``None`` (unknown), never 0, so a pane
can show "—" instead of a lie.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from infmon.model.server.families import ServerDetail, ServerDetailDict

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


class GpuProcessDict(TypedDict):
    name: str
    kind: str
    pid: int | None
    namespace: str | None
    container: str | None
    mem_used_mib: float | None
    sm_percent: float | None


class GpuDict(TypedDict):
    """``GpuSnapshot.to_dict()``: its numbers are ``GPU_NUMBERS``, in that order."""

    source: str
    index: str
    name: str | None
    uuid: str | None
    hostname: str | None
    mig_profile: str | None
    util_percent: float | None
    engine_active: float | None
    sm_active: float | None
    dram_active: float | None
    tensor_active: float | None
    mem_copy_util_percent: float | None
    mem_used_mib: float | None
    mem_free_mib: float | None
    mem_reserved_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    temp_c: float | None
    mem_temp_c: float | None
    power_violation_us: float | None
    thermal_violation_us: float | None
    throttle_reasons: list[str] | None
    processes: list[GpuProcessDict]
    labels: dict[str, str]


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


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """Who holds a GPU: a process (NVML) or a pod (DCGM's Kubernetes attribution)."""

    name: str
    """The process name (NVML) or the pod name (DCGM), sanitised."""
    kind: str = "process"
    """``"process"`` or ``"pod"``."""
    pid: int | None = None
    namespace: str | None = None
    container: str | None = None
    mem_used_mib: float | None = None
    """What this holder uses (NVML per process; DCGM per pod when the exporter splits it)."""
    sm_percent: float | None = None
    """Its share of SM time in percent (NVML process utilisation; DCGM's per-pod GPU_UTIL)."""

    def to_dict(self) -> GpuProcessDict:
        return {
            "name": self.name,
            "kind": self.kind,
            "pid": self.pid,
            "namespace": self.namespace,
            "container": self.container,
            "mem_used_mib": self.mem_used_mib,
            "sm_percent": self.sm_percent,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuProcess:
        pid = d.get("pid")
        return cls(
            name=str(d.get("name") or "?"),
            kind=str(d.get("kind") or "process"),
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            namespace=_str_or_none(d.get("namespace")),
            container=_str_or_none(d.get("container")),
            mem_used_mib=_num_or_none(d.get("mem_used_mib")),
            sm_percent=_num_or_none(d.get("sm_percent")),
        )


GPU_NUMBERS = (
    "util_percent",
    "engine_active",
    "sm_active",
    "dram_active",
    "tensor_active",
    "mem_copy_util_percent",
    "mem_used_mib",
    "mem_free_mib",
    "mem_reserved_mib",
    "mem_total_mib",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "temp_c",
    "mem_temp_c",
    "power_violation_us",
    "thermal_violation_us",
)
"""The numeric fields of ``GpuSnapshot`` (None = not published), in ``to_dict`` order."""


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """One GPU (or MIG instance) from DCGM (a page or Prometheus) or NVML on this host.

    Every value is what the source published, in its own unit; None when it published nothing
    (or DCGM's "blank" sentinel), never 0.
    """

    source: str
    """``"dcgm"`` or ``"nvml"``."""
    index: str
    """The GPU index, ``"0/7"`` for MIG instance 7 on GPU 0."""
    name: str | None = None
    uuid: str | None = None
    hostname: str | None = None
    mig_profile: str | None = None
    """``GPU_I_PROFILE`` (e.g. ``1g.10gb``); None for a whole GPU."""
    util_percent: float | None = None
    """``DCGM_FI_DEV_GPU_UTIL`` / NVML ``utilization.gpu``: time a kernel ran (0–100)."""
    engine_active: float | None = None
    """``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0–1)."""
    sm_active: float | None = None
    """``DCGM_FI_PROF_SM_ACTIVE`` (0–1)."""
    dram_active: float | None = None
    """``DCGM_FI_PROF_DRAM_ACTIVE``: memory interface busy (0–1)."""
    tensor_active: float | None = None
    """``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` (0–1)."""
    mem_copy_util_percent: float | None = None
    """``DCGM_FI_DEV_MEM_COPY_UTIL`` / NVML ``utilization.memory`` (0–100)."""
    mem_used_mib: float | None = None
    mem_free_mib: float | None = None
    mem_reserved_mib: float | None = None
    mem_total_mib: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    temp_c: float | None = None
    mem_temp_c: float | None = None
    power_violation_us: float | None = None
    """``DCGM_FI_DEV_POWER_VIOLATION``: time throttled by power since boot (counter, µs)."""
    thermal_violation_us: float | None = None
    throttle_reasons: tuple[str, ...] | None = None
    """Active clock-throttle reasons (decoded bitmask); None = not published, () = none."""
    processes: tuple[GpuProcess, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    """The labels that identify it on its page (``gpu``, ``UUID``, ``GPU_I_ID``, host…)."""

    @property
    def key(self) -> str:
        """Stable identity across scrapes: host, UUID (or index) and instance."""
        host = self.hostname or ""
        return f"{self.source}:{host}:{self.uuid or ''}:{self.index}"

    @property
    def activity(self) -> float | None:
        """Busy fraction 0–1: graphics-engine activity, else SM activity, else GPU_UTIL."""
        for value in (self.engine_active, self.sm_active):
            if value is not None:
                return value
        return None if self.util_percent is None else self.util_percent / 100.0

    def to_dict(self) -> GpuDict:
        return {
            "source": self.source,
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "hostname": self.hostname,
            "mig_profile": self.mig_profile,
            "util_percent": self.util_percent,
            "engine_active": self.engine_active,
            "sm_active": self.sm_active,
            "dram_active": self.dram_active,
            "tensor_active": self.tensor_active,
            "mem_copy_util_percent": self.mem_copy_util_percent,
            "mem_used_mib": self.mem_used_mib,
            "mem_free_mib": self.mem_free_mib,
            "mem_reserved_mib": self.mem_reserved_mib,
            "mem_total_mib": self.mem_total_mib,
            "power_w": self.power_w,
            "power_limit_w": self.power_limit_w,
            "sm_clock_mhz": self.sm_clock_mhz,
            "sm_clock_max_mhz": self.sm_clock_max_mhz,
            "temp_c": self.temp_c,
            "mem_temp_c": self.mem_temp_c,
            "power_violation_us": self.power_violation_us,
            "thermal_violation_us": self.thermal_violation_us,
            "throttle_reasons": (
                None if self.throttle_reasons is None else list(self.throttle_reasons)
            ),
            "processes": [p.to_dict() for p in self.processes],
            "labels": dict(self.labels),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GpuSnapshot:
        """From a journal scrape (``to_dict`` with None values possibly left out)."""
        reasons, labels, procs = d.get("throttle_reasons"), d.get("labels"), d.get("processes")
        labels = labels if isinstance(labels, Mapping) else {}
        procs = procs if isinstance(procs, list) else []
        return cls(
            source=str(d.get("source") or "dcgm"),
            index=str(d.get("index") or "?"),
            name=_str_or_none(d.get("name")),
            uuid=_str_or_none(d.get("uuid")),
            hostname=_str_or_none(d.get("hostname")),
            mig_profile=_str_or_none(d.get("mig_profile")),
            throttle_reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else None,
            processes=tuple(GpuProcess.from_dict(p) for p in procs if isinstance(p, Mapping)),
            labels=tuple((str(k), str(v)) for k, v in labels.items()),
            **{k: _num_or_none(d.get(k)) for k in GPU_NUMBERS},
        )


def _num_or_none(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(x) else None


def _str_or_none(x: Any) -> str | None:
    return x if isinstance(x, str) else None


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
