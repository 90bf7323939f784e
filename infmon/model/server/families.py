"""The server families vLLM added in 2025–26, in the canonical snapshot (unknown is None).

Names, labels and types as the installed vLLM 0.32 source declares them
(``vllm/v1/metrics/loggers.py``; the KV-offloading connector's
``distributed/kv_transfer/kv_connector/v1/offloading/metrics.py``; NIXL's ``nixl/stats.py``):

- ``vllm:num_requests_waiting_by_reason{reason=capacity|deferred}`` gauge: why requests wait.
- ``vllm:prompt_tokens_by_source_total{source=local_compute|local_cache_hit|external_kv_transfer}``
  counter: where each prompt token's KV came from (the true prefix / KV-reuse share).
- ``vllm:prompt_tokens_cached_total`` and ``..._by_source_total{source=device|host|disk|p2p|
  external_unspecified}`` counters: which cache tier supplied a hit.
- ``vllm:admission_rejections_total{reason}`` counter (no ``engine`` label).
- ``vllm:engine_sleep_state{sleep_state=awake|weights_offloaded|discard_all}`` gauge, 1 on the
  state the engine is in: a sleeping engine is a state, not an outage.
- ``vllm:kv_offload_{load,store}_{bytes,time}_total`` counters (bytes, seconds).
- ``vllm:nixl_xfer_time_seconds``, ``vllm:nixl_bytes_transferred`` histograms and
  ``vllm:nixl_num_failed_transfers_total``: disaggregated prefill/decode KV transfer.
- ``vllm:lora_requests_info{max_lora, running_lora_adapters, waiting_lora_adapters}`` gauge.
- ``vllm:estimated_{flops,read_bytes,write_bytes}_per_gpu_total`` counters (the MFU estimates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict

LOCAL_COMPUTE = "local_compute"
LOCAL_CACHE_HIT = "local_cache_hit"
EXTERNAL_KV = "external_kv_transfer"


class KvOffloadDict(TypedDict):
    load_bytes_total: float | None
    store_bytes_total: float | None
    load_time_s_total: float | None
    store_time_s_total: float | None
    load_bytes_per_s: float | None
    store_bytes_per_s: float | None
    load_time_fraction: float | None


class PdTransferDict(TypedDict):
    transfers: float | None
    xfer_time_mean_s: float | None
    xfer_time_p90_s: float | None
    bytes_mean: float | None
    bytes_total: float | None
    failed_total: float | None


class LoraDict(TypedDict):
    max_lora: int | None
    running: list[str]
    waiting: list[str]


class _EstimatesCounters(TypedDict):
    flops_total: float | None
    read_bytes_total: float | None
    write_bytes_total: float | None
    flops_per_s: float | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None


class EstimatesDict(_EstimatesCounters, total=False):
    """The counters always; the MFU keys below are not in journals from before MFU (a base
    class and ``total=False`` rather than ``NotRequired``, which Python 3.10 lacks)."""

    peak_flops_per_gpu: float | None
    peak_source: str | None
    mfu: float | None


class ServerDetailDict(TypedDict):
    """``ServerDetail.to_dict()``: the keys of ``infmon scrape --json`` it adds."""

    waiting_by_reason: dict[str, float] | None
    prompt_tokens_by_source_total: dict[str, float] | None
    prompt_tokens_by_source_window: dict[str, float] | None
    prompt_tokens_cached_total: float | None
    prompt_tokens_cached_by_source_total: dict[str, float] | None
    admission_rejections_total: dict[str, float] | None
    engine_sleep_state: str | None
    kv_offload: KvOffloadDict | None
    pd_transfer: PdTransferDict | None
    lora: LoraDict | None
    estimates: EstimatesDict | None


def _share(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


@dataclass(frozen=True, slots=True)
class KvOffload:
    """KV moved between the GPU and an offload tier (CPU memory, disk)."""

    load_bytes_total: float | None = None
    store_bytes_total: float | None = None
    load_time_s_total: float | None = None
    store_time_s_total: float | None = None
    load_bytes_per_s: float | None = None
    store_bytes_per_s: float | None = None
    load_time_fraction: float | None = None
    """Seconds spent loading per second of the window (0.18: 18% of the time)."""

    def to_dict(self) -> KvOffloadDict:
        return {
            "load_bytes_total": self.load_bytes_total,
            "store_bytes_total": self.store_bytes_total,
            "load_time_s_total": self.load_time_s_total,
            "store_time_s_total": self.store_time_s_total,
            "load_bytes_per_s": self.load_bytes_per_s,
            "store_bytes_per_s": self.store_bytes_per_s,
            "load_time_fraction": self.load_time_fraction,
        }


@dataclass(frozen=True, slots=True)
class PdTransfer:
    """Disaggregated prefill/decode: KV transfers between the pods (NIXL)."""

    transfers: float | None = None
    """Transfers in the window (since start from one page)."""
    xfer_time_mean_s: float | None = None
    xfer_time_p90_s: float | None = None
    bytes_mean: float | None = None
    bytes_total: float | None = None
    failed_total: float | None = None

    def to_dict(self) -> PdTransferDict:
        return {
            "transfers": self.transfers,
            "xfer_time_mean_s": self.xfer_time_mean_s,
            "xfer_time_p90_s": self.xfer_time_p90_s,
            "bytes_mean": self.bytes_mean,
            "bytes_total": self.bytes_total,
            "failed_total": self.failed_total,
        }


@dataclass(frozen=True, slots=True)
class LoraState:
    max_lora: int | None = None
    running: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()

    def to_dict(self) -> LoraDict:
        return {
            "max_lora": self.max_lora,
            "running": list(self.running),
            "waiting": list(self.waiting),
        }


@dataclass(frozen=True, slots=True)
class Estimates:
    """vLLM's own MFU estimates: FLOPs and bytes per GPU (counters), and their rates."""

    flops_total: float | None = None
    read_bytes_total: float | None = None
    write_bytes_total: float | None = None
    flops_per_s: float | None = None
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    peak_flops_per_gpu: float | None = None
    """The GPU's dense BF16 peak (``efficiency.resolve_peak``), None when not known."""
    peak_source: str | None = None
    mfu: float | None = None
    """FLOP/s per GPU over the peak: None when either is unknown."""

    def to_dict(self) -> EstimatesDict:
        return {
            "flops_total": self.flops_total,
            "read_bytes_total": self.read_bytes_total,
            "write_bytes_total": self.write_bytes_total,
            "flops_per_s": self.flops_per_s,
            "read_bytes_per_s": self.read_bytes_per_s,
            "write_bytes_per_s": self.write_bytes_per_s,
            "peak_flops_per_gpu": self.peak_flops_per_gpu,
            "peak_source": self.peak_source,
            "mfu": self.mfu,
        }


@dataclass(frozen=True, slots=True)
class ServerDetail:
    """The families above; each None (or empty) when the page does not have it."""

    waiting_by_reason: Mapping[str, float] = field(default_factory=dict)
    prompt_tokens_by_source_total: Mapping[str, float] = field(default_factory=dict)
    prompt_tokens_by_source_window: Mapping[str, float] = field(default_factory=dict)
    """Increase over the window (since start from one page)."""
    prompt_tokens_cached_total: float | None = None
    prompt_tokens_cached_by_source_total: Mapping[str, float] = field(default_factory=dict)
    admission_rejections_total: Mapping[str, float] = field(default_factory=dict)
    sleep_state: str | None = None
    kv_offload: KvOffload | None = None
    pd_transfer: PdTransfer | None = None
    lora: LoraState | None = None
    estimates: Estimates | None = None

    def source_share(self, source: str) -> float | None:
        """One source's share of the window's prompt tokens (``local_cache_hit``: the true
        prefix-reuse share; ``external_kv_transfer``: KV that came from another instance)."""
        w = self.prompt_tokens_by_source_window
        return _share(w.get(source), sum(w.values())) if source in w else None

    @property
    def asleep(self) -> bool:
        return self.sleep_state is not None and self.sleep_state != "awake"

    def to_dict(self) -> ServerDetailDict:
        """The keys of ``infmon scrape --json`` (null when the page lacks the family)."""

        def d(m: Mapping[str, float]) -> dict[str, float] | None:
            return dict(m) if m else None

        return {
            "waiting_by_reason": d(self.waiting_by_reason),
            "prompt_tokens_by_source_total": d(self.prompt_tokens_by_source_total),
            "prompt_tokens_by_source_window": d(self.prompt_tokens_by_source_window),
            "prompt_tokens_cached_total": self.prompt_tokens_cached_total,
            "prompt_tokens_cached_by_source_total": d(self.prompt_tokens_cached_by_source_total),
            "admission_rejections_total": d(self.admission_rejections_total),
            "engine_sleep_state": self.sleep_state,
            "kv_offload": self.kv_offload.to_dict() if self.kv_offload else None,
            "pd_transfer": self.pd_transfer.to_dict() if self.pd_transfer else None,
            "lora": self.lora.to_dict() if self.lora else None,
            "estimates": self.estimates.to_dict() if self.estimates else None,
        }


DETAIL_KEYS = tuple(ServerDetail().to_dict())
"""The top-level keys the snapshot's ``to_dict`` adds (null on a page without them)."""


NAN = float("nan")

PREFILL = "prefill"
DECODE = "decode"


def pd_role(nixl_transfers: float | None, prompt_tokens: float | None) -> str | None:
    """A pod's part in disaggregated prefill/decode, from its own page: NIXL's families are
    there on both pods; the decode pod pulls the prompts' KV (its transfers count up), the
    prefill pod computes prompts and pulls nothing. None: no NIXL connector, or no traffic yet
    to tell."""
    if nixl_transfers is None:
        return None
    if nixl_transfers > 0:
        return DECODE
    return PREFILL if prompt_tokens else None


def _f(x: float | None) -> float:
    return NAN if x is None else x


@dataclass(frozen=True, slots=True)
class DetailView:
    """What the server pane and the diagnosis read of ``ServerDetail`` (``nan``: unknown)."""

    waiting_capacity: float = NAN
    waiting_deferred: float = NAN
    cache_hit_share: float = NAN
    """``local_cache_hit`` share of the window's prompt tokens (the true prefix reuse)."""
    external_kv_share: float = NAN
    external_kv_from: str = "other instances"
    """Where that KV came from, by the cached-by-source counters: ``host memory`` (offload),
    ``other instances`` (P/D, cross-instance sharing) or ``KV connectors`` (both)."""
    sleep_state: str | None = None
    rejections_total: float = NAN
    offload_load_bytes_per_s: float = NAN
    offload_store_bytes_per_s: float = NAN
    offload_load_fraction: float = NAN
    pd_xfer_mean_s: float = NAN
    pd_failed_total: float = NAN
    lora_running: int | None = None
    lora_waiting: int | None = None
    mfu: float = NAN
    mfu_unknown: bool = False
    """The server is computing (estimated FLOP/s > 0) but the GPU's peak is not known."""


def _external_from(by_source: Mapping[str, float]) -> str:
    host = by_source.get("host", 0.0) + by_source.get("disk", 0.0)
    other = sum(v for k, v in by_source.items() if k not in ("host", "disk", "device"))
    if host > 0 and not other:
        return "host memory"
    return "KV connectors" if host > 0 else "other instances"


def detail_view(d: ServerDetail, waiting: float | None = None) -> DetailView | None:
    """None when the page has none of the families (an older vLLM, another server). vLLM's
    waiting gauge is capacity + deferred: a page where they disagree gives no breakdown."""
    if d == ServerDetail():
        return None
    off, pd, lora, est = d.kv_offload, d.pd_transfer, d.lora, d.estimates
    capacity, deferred = (
        _f(d.waiting_by_reason.get("capacity")),
        _f(d.waiting_by_reason.get("deferred")),
    )
    if waiting is None or abs(capacity + deferred - waiting) >= 0.5:
        capacity = deferred = NAN
    return DetailView(
        waiting_capacity=capacity,
        waiting_deferred=deferred,
        cache_hit_share=_f(d.source_share(LOCAL_CACHE_HIT)),
        external_kv_share=_f(d.source_share(EXTERNAL_KV)),
        external_kv_from=_external_from(d.prompt_tokens_cached_by_source_total),
        sleep_state=d.sleep_state,
        rejections_total=sum(d.admission_rejections_total.values())
        if d.admission_rejections_total
        else NAN,
        offload_load_bytes_per_s=_f(off.load_bytes_per_s) if off else NAN,
        offload_store_bytes_per_s=_f(off.store_bytes_per_s) if off else NAN,
        offload_load_fraction=_f(off.load_time_fraction) if off else NAN,
        pd_xfer_mean_s=_f(pd.xfer_time_mean_s) if pd else NAN,
        pd_failed_total=_f(pd.failed_total) if pd else NAN,
        lora_running=len(lora.running) if lora else None,
        lora_waiting=len(lora.waiting) if lora else None,
        mfu=_f(est.mfu) if est else NAN,
        mfu_unknown=est is not None and bool(est.flops_per_s) and est.mfu is None,
    )
