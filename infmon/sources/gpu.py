"""GPU telemetry from DCGM exporter series (a page of its own, the server's page, or Prometheus).

One ``GpuSnapshot`` per GPU or MIG instance, keyed by host, GPU index and GPU instance (never by
UUID alone: a MIG instance carries its parent's UUID, and pasted pages redact UUIDs to one string).
Kubernetes attribution labels (``pod``, ``namespace``, ``container``; older ``pod_name`` …) say who
holds a GPU: they become the GPU's ``processes`` (kind ``"pod"``), not part of its identity. When
a time-shared GPU is held by several pods (``--kubernetes-virtual-gpus``), dcgm-exporter copies
every series per pod, and since 4.6 splits ``GPU_UTIL`` and ``FB_USED`` per pod from NVML's
per-process figures beside the device's own series: values that differ between the pods (or sit
beside a device series) are the pods' own; values copied to every pod are the device's.

Absent stays absent: DCGM's "blank" sentinels (int32 ``0x7ffffff0``…, int64 ``0x7ffffffffffffff0``…,
fp64 ``2**47``), negative values and ratios or percentages out of range are no reading (None).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from infmon.model.server.gpu import GpuProcess, GpuSnapshot
from infmon.sources.exposition import Page, Sample

PREFIX = "DCGM_FI_"
RATIO, PERCENT, AMOUNT, COUNTER, MASK = "ratio", "percent", "amount", "counter", "mask"

FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("util_percent", PERCENT),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("engine_active", RATIO),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_active", RATIO),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_active", RATIO),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("tensor_active", RATIO),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_copy_util_percent", PERCENT),
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", AMOUNT),
    "DCGM_FI_DEV_FB_FREE": ("mem_free_mib", AMOUNT),
    "DCGM_FI_DEV_FB_RESERVED": ("mem_reserved_mib", AMOUNT),
    "DCGM_FI_DEV_FB_TOTAL": ("mem_total_mib", AMOUNT),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", AMOUNT),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("power_limit_w", AMOUNT),
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": ("power_limit_w", AMOUNT),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", AMOUNT),
    "DCGM_FI_DEV_MAX_SM_CLOCK": ("sm_clock_max_mhz", AMOUNT),
    "DCGM_FI_DEV_GPU_TEMP": ("temp_c", AMOUNT),
    "DCGM_FI_DEV_MEMORY_TEMP": ("mem_temp_c", AMOUNT),
    "DCGM_FI_DEV_POWER_VIOLATION": ("power_violation_us", COUNTER),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("thermal_violation_us", COUNTER),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("throttle_mask", MASK),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("throttle_mask", MASK),
}
"""DCGM field → (``GpuSnapshot`` attribute, kind). A counter may be exposed with ``_total``."""

PER_HOLDER = {"util_percent": "sm_percent", "mem_used_mib": "mem_used_mib"}
"""The fields dcgm-exporter splits per pod, and the ``GpuProcess`` attribute they fill."""

THROTTLE_REASONS = (
    (0x1, "idle"),
    (0x2, "application clocks"),
    (0x4, "power cap"),
    (0x8, "hw slowdown"),
    (0x10, "sync boost"),
    (0x20, "thermal (sw)"),
    (0x40, "thermal (hw)"),
    (0x80, "power brake (hw)"),
    (0x100, "display clocks"),
)
"""NVML's clocks-event (throttle) reason bits, as DCGM passes them through."""

_HOST_LABELS = ("Hostname", "hostname")
_UUID_LABELS = ("UUID", "uuid")
_POD_LABELS = (("pod", "namespace", "container"), ("pod_name", "pod_namespace", "container_name"))
_INT32_BLANK = (2147483632.0, 2147483647.0)
_INT64_BLANK = 9.2e18
_FP64_BLANK = (140737488355328.0, 140737488355331.0)

DeviceKey = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class GpuReading:
    """What one read of a GPU source gave: the GPUs, or why there are none (said quietly)."""

    gpus: tuple[GpuSnapshot, ...] = ()
    note: str | None = None


def is_blank(value: float, kind: str = AMOUNT) -> bool:
    """True for DCGM's no-value sentinels (blank, not found, not supported, no permission)."""
    if not math.isfinite(value) or value >= _INT64_BLANK:
        return True
    if _FP64_BLANK[0] <= value <= _FP64_BLANK[1]:
        return True
    return kind != COUNTER and _INT32_BLANK[0] <= value <= _INT32_BLANK[1]


def reading(value: float, kind: str) -> float | None:
    """The value as a reading of its kind, or None when it is no reading at all."""
    if is_blank(value, kind) or value < 0:
        return None
    if kind == RATIO and value > 1.0 + 1e-9:
        return None
    if kind == PERCENT and value > 100.0 + 1e-9:
        return None
    return value


def throttle_names(mask: float | None) -> tuple[str, ...] | None:
    """The active reasons of a clocks-event bitmask (None: not published)."""
    if mask is None or mask != int(mask):
        return None
    bits = int(mask)
    return tuple(name for bit, name in THROTTLE_REASONS if bits & bit)


@dataclass
class _Device:
    labels: Mapping[str, str]
    values: dict[str, float] = field(default_factory=dict)
    device_series: set[str] = field(default_factory=set)
    holders: dict[tuple[str, str, str], dict[str, float | None]] = field(default_factory=dict)


def _first(labels: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    return next((labels[n] for n in names if labels.get(n)), None)


def device_key(labels: Mapping[str, str]) -> DeviceKey:
    """Host, GPU index, UUID and GPU instance: what tells two GPUs (or MIG slices) apart."""
    return (
        _first(labels, _HOST_LABELS) or "",
        labels.get("gpu", ""),
        _first(labels, _UUID_LABELS) or "",
        labels.get("GPU_I_ID", ""),
    )


def holder_of(labels: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(pod, namespace, container) of an attributed series, None for the device's own."""
    for pod, ns, container in _POD_LABELS:
        if labels.get(pod):
            return labels[pod], labels.get(ns, ""), labels.get(container, "")
    return None


def _collect(samples_by_name: Mapping[str, tuple[Sample, ...]]) -> dict[DeviceKey, _Device]:
    devices: dict[DeviceKey, _Device] = {}
    for name, samples in samples_by_name.items():
        if not name.startswith(PREFIX):
            continue
        base = name[: -len("_total")] if name.endswith("_total") else name
        attr, kind = FIELDS.get(base, FIELDS.get(name, ("", "")))
        for s in samples:
            dev = devices.setdefault(device_key(s.labels), _Device(s.labels))
            if not attr:
                continue
            value = reading(s.value, kind)
            holder = holder_of(s.labels)
            if holder is None:
                dev.device_series.add(attr)
                if value is not None:
                    dev.values[attr] = value
            else:
                dev.holders.setdefault(holder, {})[attr] = value
    return devices


def _resolve(dev: _Device) -> tuple[dict[str, float], dict[tuple[str, str, str], dict[str, float]]]:
    """Device values, and the values that are each holder's own (see the module docstring)."""
    values = dict(dev.values)
    own: dict[tuple[str, str, str], dict[str, float]] = {h: {} for h in dev.holders}
    attrs = {a for per in dev.holders.values() for a in per}
    for attr in attrs:
        seen = {h: per[attr] for h, per in dev.holders.items() if attr in per}
        distinct = {v for v in seen.values()}
        split = attr in PER_HOLDER and (attr in dev.device_series or len(distinct) > 1)
        if split:
            for h, v in seen.items():
                if v is not None:
                    own[h][attr] = v
        elif attr not in dev.device_series and len(distinct) == 1:
            (v,) = distinct
            if v is not None:
                values[attr] = v
    return values, own


def _processes(
    dev: _Device, own: Mapping[tuple[str, str, str], Mapping[str, float]]
) -> tuple[GpuProcess, ...]:
    out = []
    for (pod, ns, container), per in own.items():
        out.append(
            GpuProcess(
                name=pod,
                kind="pod",
                namespace=ns or None,
                container=container or None,
                mem_used_mib=per.get("mem_used_mib"),
                sm_percent=per.get("util_percent"),
            )
        )
    return tuple(out)


def _total(v: Mapping[str, float]) -> float | None:
    """FB_TOTAL, else used + free (+ reserved, where the driver publishes it)."""
    if "mem_total_mib" in v:
        return v["mem_total_mib"]
    if "mem_used_mib" in v and "mem_free_mib" in v:
        return v["mem_used_mib"] + v["mem_free_mib"] + v.get("mem_reserved_mib", 0.0)
    return None


def _snapshot(dev: _Device) -> GpuSnapshot:
    values, own = _resolve(dev)
    labels = dev.labels
    host, gpu, uuid, instance = device_key(labels)
    idx = (gpu or "?") + (f"/{instance}" if instance else "")
    numbers = {a: values.get(a) for a, _ in FIELDS.values() if a != "throttle_mask"}
    identity = ("gpu", *_UUID_LABELS, "GPU_I_ID", "GPU_I_PROFILE", *_HOST_LABELS, "modelName")
    return GpuSnapshot(
        source="dcgm",
        index=idx,
        name=labels.get("modelName"),
        uuid=uuid or None,
        hostname=host or None,
        mig_profile=labels.get("GPU_I_PROFILE"),
        throttle_reasons=throttle_names(values.get("throttle_mask")),
        processes=_processes(dev, own),
        labels=tuple((k, labels[k]) for k in identity if k in labels),
        **{**numbers, "mem_total_mib": _total(values)},
    )


def dcgm_gpus(page: Page) -> tuple[GpuSnapshot, ...]:
    """One ``GpuSnapshot`` per GPU / MIG instance found in the page's DCGM exporter series."""
    by_name = {n: page.get(n) for n in page.names if n.startswith(PREFIX)}
    if not by_name:
        return ()
    return tuple(sorted((_snapshot(d) for d in _collect(by_name).values()), key=order))


def order(g: GpuSnapshot) -> tuple[str, int, int, str]:
    """Host, then GPU index, then GPU instance, as numbers (GPU 10 after GPU 9)."""
    gpu, _, inst = g.index.partition("/")
    num = int(gpu) if gpu.isdigit() else 1 << 30
    sub = int(inst) if inst.isdigit() else -1
    return (g.hostname or "", num, sub, g.index)


def gpu_ref(g: GpuSnapshot) -> str:
    """How a pod's row names its GPU: ``host/index`` (``index`` without a host)."""
    return f"{g.hostname}/{g.index}" if g.hostname else g.index


def _rx(c: str) -> str:
    if c == '"':
        return '\\"'  # the PromQL string's escape; a quote is literal to the regex
    if c == "\\":
        return "\\" * 4
    if c.isascii() and not (c.isalnum() or c == "_"):
        return "\\" * 2 + c  # escaped for the regex, the backslash escaped for the string
    return c


def promql_regex(values: Iterable[str]) -> str:
    """``a|b`` matching exactly these label values, for ``label=~"…"`` in a PromQL query."""
    return "|".join("".join(_rx(c) for c in v) for v in sorted(set(values)))


def gpus_of_pods(
    gpus: Iterable[GpuSnapshot], pods: Mapping[str, str]
) -> dict[str, tuple[str, ...]]:
    """Each pod's GPUs (``gpu_ref``): the GPUs it holds (DCGM's pod attribution), else the GPUs
    of its host (``pods`` maps a pod to the host part of its ``instance``)."""
    gpus = tuple(gpus)
    out: dict[str, tuple[str, ...]] = {}
    for pod, host in pods.items():
        held = [
            gpu_ref(g) for g in gpus if any(p.kind == "pod" and p.name == pod for p in g.processes)
        ]
        if not held and host:
            held = [gpu_ref(g) for g in gpus if g.hostname == host]
        out[pod] = tuple(held)
    return out
