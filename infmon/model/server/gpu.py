"""One GPU as the server's telemetry publishes it: DCGM (a page, or Prometheus for a fleet) or
NVML on this host, with who holds it (a process or a pod). Part of the canonical snapshot
(``ServerSnapshot.gpus``); every value is the source's own, None where it published nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict


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
