"""The 2025–26 vLLM families (``infmon.model.server.families``) read from a page and a window.

Labelled families (a value per ``reason`` / ``source`` / ``sleep_state``) are summed over
engines per label value; label values come from a server, so they are sanitised and bounded
(at most ``MAX_LABEL_VALUES`` per family). Counters become window increases and rates as every
other counter does (reset-aware); one page gives its own totals, no rates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Protocol

from infmon.model.base.rates import counter_increase
from infmon.model.base.sanitize import clean
from infmon.model.server.efficiency import mfu, resolve_peak
from infmon.model.server.families import Estimates, KvOffload, LoraState, PdTransfer, ServerDetail
from infmon.model.server.histogram import Histogram, window_stat
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sources.backends.table import BackendTable
from infmon.sources.exposition import Page
from infmon.sources.poller import SnapshotSource

MAX_LABEL_VALUES = 32
MAX_LABEL_CHARS = 64
Labelled = Mapping[str, Mapping[str, float]]


def read_labelled(page: Page, table: BackendTable) -> dict[str, dict[str, float]]:
    """concept → label value → value summed over engines (negative / non-finite dropped)."""
    out: dict[str, dict[str, float]] = {}
    for concept, (name, label) in table.labelled.items():
        values: dict[str, float] = {}
        for s in page.get(name):
            key = s.labels.get(label)
            if key is None or not 0.0 <= s.value < math.inf:
                continue
            key = clean(key, MAX_LABEL_CHARS)
            if key in values or len(values) < MAX_LABEL_VALUES:
                values[key] = values.get(key, 0.0) + s.value
        if values:
            out[concept] = values
    return out


def read_lora(page: Page, name: str = "vllm:lora_requests_info") -> LoraState | None:
    """The newest ``lora_requests_info`` series: its labels are the data (adapters, comma-joined)."""
    series = [s for s in page.get(name) if math.isfinite(s.value)]
    if not series:
        return None
    s = max(series, key=lambda x: x.value)  # the value is the time it was set

    def names(label: str) -> tuple[str, ...]:
        text = s.labels.get(label) or ""
        return tuple(clean(n, MAX_LABEL_CHARS) for n in text.split(",") if n)[:MAX_LABEL_VALUES]

    raw = s.labels.get("max_lora")
    max_lora = int(raw) if raw is not None and raw.isdigit() and len(raw) < 7 else None
    return LoraState(max_lora, names("running_lora_adapters"), names("waiting_lora_adapters"))


class WindowView(Protocol):
    window_s: float | None

    def total(self, concept: str) -> float | None: ...
    def increase(self, concept: str) -> float | None: ...
    def rate(self, concept: str) -> float | None: ...
    def hist(self, concept: str) -> Histogram | None: ...


def _increase_by_label(
    cur: Mapping[str, float], prev: Mapping[str, float] | None
) -> dict[str, float]:
    if prev is None:
        return dict(cur)
    return {k: counter_increase(prev.get(k, 0.0), v)[0] or 0.0 for k, v in cur.items()}


def _kv_offload(w: WindowView) -> KvOffload | None:
    concepts = (
        "kv_offload_load_bytes",
        "kv_offload_store_bytes",
        "kv_offload_load_time",
        "kv_offload_store_time",
    )
    if all(w.total(c) is None for c in concepts):
        return None
    load_time = w.rate("kv_offload_load_time")
    return KvOffload(
        load_bytes_total=w.total("kv_offload_load_bytes"),
        store_bytes_total=w.total("kv_offload_store_bytes"),
        load_time_s_total=w.total("kv_offload_load_time"),
        store_time_s_total=w.total("kv_offload_store_time"),
        load_bytes_per_s=w.rate("kv_offload_load_bytes"),
        store_bytes_per_s=w.rate("kv_offload_store_bytes"),
        load_time_fraction=load_time,
    )


def _pd(w: WindowView) -> PdTransfer | None:
    xfer, size = window_stat(w.hist("nixl_xfer_time")), window_stat(w.hist("nixl_bytes"))
    failed = w.total("nixl_failed_transfers")
    if xfer is None and size is None and failed is None:
        return None
    return PdTransfer(
        transfers=xfer.count if xfer else None,
        xfer_time_mean_s=xfer.mean if xfer else None,
        xfer_time_p90_s=xfer.p90 if xfer else None,
        bytes_mean=size.mean if size else None,
        bytes_total=(size.mean * size.count)
        if size and size.mean is not None and size.count
        else None,
        failed_total=failed,
    )


def _estimates(w: WindowView) -> Estimates | None:
    names = ("est_flops", "est_read_bytes", "est_write_bytes")
    if all(w.total(c) is None for c in names):
        return None
    flops, read, write = names
    return Estimates(
        flops_total=w.total(flops),
        read_bytes_total=w.total(read),
        write_bytes_total=w.total(write),
        flops_per_s=w.rate(flops),
        read_bytes_per_s=w.rate(read),
        write_bytes_per_s=w.rate(write),
    )


def server_detail(
    w: WindowView, cur: Labelled, prev: Labelled | None, lora: LoraState | None
) -> ServerDetail:
    """The families of one page (``prev`` None) or of a window between two pages."""
    by_source = cur.get("prompt_tokens_by_source", {})
    state = cur.get("sleep_state", {})
    awake = [k for k, v in state.items() if v >= 1.0]
    return ServerDetail(
        waiting_by_reason=dict(cur.get("waiting_by_reason", {})),
        prompt_tokens_by_source_total=dict(by_source),
        prompt_tokens_by_source_window=_increase_by_label(
            by_source, None if prev is None else prev.get("prompt_tokens_by_source", {})
        ),
        prompt_tokens_cached_total=w.total("prompt_tokens_cached"),
        prompt_tokens_cached_by_source_total=dict(cur.get("prompt_tokens_cached_by_source", {})),
        admission_rejections_total=dict(cur.get("admission_rejections", {})),
        sleep_state=awake[0] if len(awake) == 1 else None,
        kv_offload=_kv_offload(w),
        pd_transfer=_pd(w),
        lora=lora,
        estimates=_estimates(w),
    )


def with_mfu(snap: ServerSnapshot, flag_tflops: float | None) -> ServerSnapshot:
    """The snapshot with MFU: vLLM's estimated FLOP/s per GPU (a fleet's rate shared over its
    engines) over the peak of ``--gpu-peak-tflops`` or of the GPUs the telemetry names."""
    est = snap.detail.estimates
    if est is None:
        return snap
    peak = resolve_peak(flag_tflops, [g.name for g in snap.gpus])
    per_gpu = None if est.flops_per_s is None else est.flops_per_s / max(1, len(snap.engines))
    est = replace(
        est,
        peak_flops_per_gpu=peak.flops_per_s if peak else None,
        peak_source=peak.source if peak else None,
        mfu=mfu(per_gpu, peak),
    )
    return replace(snap, detail=replace(snap.detail, estimates=est))


class WithMfu:
    """A source whose snapshots carry MFU (``with_mfu``); otherwise the source itself."""

    def __init__(self, source: SnapshotSource, flag_tflops: float | None) -> None:
        self.source = source
        self.flag_tflops = flag_tflops
        self.description = source.description

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        return with_mfu(await self.source.snapshot(now_s), self.flag_tflops)

    async def aclose(self) -> None:
        await self.source.aclose()

    def __getattr__(self, name: str) -> object:
        return getattr(self.source, name)
