"""GPU telemetry: DCGM exporter series (on a page or through Prometheus) and local NVML.

Absent stays absent: no DCGM series and no NVML → an empty tuple, shown as "no GPU data".
"""

from __future__ import annotations

from infmon.model.server import GpuSnapshot
from infmon.sources.exposition import Page

_ID_LABELS = ("Hostname", "hostname", "gpu", "GPU_I_ID", "UUID")
_FIELDS = {
    "util_percent": "DCGM_FI_DEV_GPU_UTIL",
    "mem_used_mib": "DCGM_FI_DEV_FB_USED",
    "power_w": "DCGM_FI_DEV_POWER_USAGE",
}
_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
_MEM_PARTS = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
_BLANK = 9.0e18
"""DCGM prints sentinels near 2**63 for "blank" (no value)."""


def _gpu_key(labels: dict[str, str] | object) -> tuple[tuple[str, str], ...]:
    assert isinstance(labels, dict)
    return tuple((k, labels[k]) for k in _ID_LABELS if k in labels)


def dcgm_gpus(page: Page) -> tuple[GpuSnapshot, ...]:
    """One ``GpuSnapshot`` per GPU / MIG instance found in DCGM exporter series."""
    values: dict[tuple[tuple[str, str], ...], dict[str, float]] = {}
    names: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for metric in (*_MEM_PARTS, _ENGINE_ACTIVE, *_FIELDS.values()):
        for s in page.get(metric):
            key = _gpu_key(dict(s.labels))
            names.setdefault(key, dict(s.labels))
            if abs(s.value) < _BLANK:
                values.setdefault(key, {})[metric] = s.value
    out = []
    for key, labels in names.items():
        v = values.get(key, {})
        util = v.get(_FIELDS["util_percent"])
        if util is None and _ENGINE_ACTIVE in v:
            util = v[_ENGINE_ACTIVE] * 100.0
        parts = [v.get(m) for m in _MEM_PARTS]
        total = sum(p for p in parts if p is not None) if parts[0] is not None else None
        if parts[1] is None:
            total = None
        idx = labels.get("gpu", "?") + (f"/{labels['GPU_I_ID']}" if "GPU_I_ID" in labels else "")
        out.append(
            GpuSnapshot(
                source="dcgm",
                index=idx,
                name=labels.get("modelName"),
                util_percent=util,
                mem_used_mib=v.get(_FIELDS["mem_used_mib"]),
                mem_total_mib=total,
                power_w=v.get(_FIELDS["power_w"]),
                labels=key,
            )
        )
    return tuple(out)


def nvml_gpus() -> tuple[GpuSnapshot, ...]:
    """Local GPUs through NVML (``nvidia-ml-py``); empty when it is not installed or no GPU."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return ()
    try:
        pynvml.nvmlInit()
    except Exception:
        return ()
    try:
        return tuple(_nvml_one(pynvml, i) for i in range(pynvml.nvmlDeviceGetCount()))
    except Exception:
        return ()
    finally:
        pynvml.nvmlShutdown()


def _nvml_one(nv: object, i: int) -> GpuSnapshot:
    h = nv.nvmlDeviceGetHandleByIndex(i)  # type: ignore[attr-defined]
    mem = nv.nvmlDeviceGetMemoryInfo(h)  # type: ignore[attr-defined]
    util = nv.nvmlDeviceGetUtilizationRates(h)  # type: ignore[attr-defined]
    name = nv.nvmlDeviceGetName(h)  # type: ignore[attr-defined]
    return GpuSnapshot(
        source="nvml",
        index=str(i),
        name=name.decode() if isinstance(name, bytes) else name,
        util_percent=float(util.gpu),
        mem_used_mib=mem.used / 2**20,
        mem_total_mib=mem.total / 2**20,
        power_w=nv.nvmlDeviceGetPowerUsage(h) / 1000.0,  # type: ignore[attr-defined]
    )
