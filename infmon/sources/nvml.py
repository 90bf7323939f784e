"""Local GPUs through NVML (``nvidia-ml-py``, imported as ``pynvml``), when infmon runs on the GPU
host: ``--gpu-metrics nvml``.

NVML is optional. Without the module, or without a driver (``nvmlInit`` fails), there is no GPU
data: ``NvmlReader.read`` returns no GPUs and a one-line note ("NVML not available: …"), never an
error. Each NVML call that the GPU does not support (``NVMLError_NotSupported``, a MIG slice
without utilisation …) leaves its field unknown; the others are still read. Calls block (a few
ms each), so the reader runs them off the caller's event loop.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from infmon.model.base.sanitize import clean
from infmon.model.server.gpu import GpuProcess, GpuSnapshot
from infmon.sources.gpu import GpuReading, throttle_names

MIB = float(2**20)
MAX_GPUS = 64
MAX_PROCESSES = 32
"""Per GPU; a GPU shared by more processes shows the largest ones."""


def import_nvml() -> ModuleType | None:
    """``pynvml`` when it imports, else None."""
    try:
        return importlib.import_module("pynvml")
    except Exception:  # ImportError, or a broken install raising anything at import
        return None


def _try(fn: Callable[..., Any], *args: Any) -> Any:
    """One NVML call; None when it raises (not supported, no permission, GPU lost …)."""
    try:
        return fn(*args)
    except Exception:
        return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return clean(value, 200) if isinstance(value, str) else None


def _num(value: Any, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) * scale


class NvmlReader:
    """Reads every GPU NVML sees; ``nv`` is the ``pynvml`` module (tests pass a fake one)."""

    description = "nvml"

    def __init__(self, nv: ModuleType | None = None) -> None:
        self.nv = nv if nv is not None else import_nvml()
        self._ready = False
        self._lock = threading.Lock()
        self._seen_us: dict[int, int] = {}
        """Per GPU, the newest process-utilisation sample already read (NVML's cursor)."""

    def read_sync(self) -> GpuReading:
        with self._lock:
            nv = self.nv
            if nv is None:
                return GpuReading(note="no GPU data: NVML (nvidia-ml-py) is not installed here")
            if not self._ready:
                try:
                    nv.nvmlInit()
                except Exception as exc:
                    return GpuReading(note=f"no GPU data: NVML not available ({_error(exc)})")
                self._ready = True
            count = _try(nv.nvmlDeviceGetCount)
            if not isinstance(count, int) or count <= 0:
                return GpuReading(note="no GPU data: NVML sees no GPU")
            gpus = [self._one(i) for i in range(min(count, MAX_GPUS))]
            return GpuReading(tuple(g for g in gpus if g is not None))

    async def read(self) -> GpuReading:
        return await asyncio.to_thread(self.read_sync)

    def close(self) -> None:
        with self._lock:
            if self._ready and self.nv is not None:
                _try(self.nv.nvmlShutdown)
            self._ready = False

    async def aclose(self) -> None:
        self.close()

    def _one(self, i: int) -> GpuSnapshot | None:
        nv = self.nv
        assert nv is not None
        h = _try(nv.nvmlDeviceGetHandleByIndex, i)
        if h is None:
            return None
        mem = _try(nv.nvmlDeviceGetMemoryInfo, h)
        util = _try(nv.nvmlDeviceGetUtilizationRates, h)
        sm = getattr(nv, "NVML_CLOCK_SM", 1)
        temp_sensor = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        limit = _try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        return GpuSnapshot(
            source="nvml",
            index=str(i),
            name=_text(_try(nv.nvmlDeviceGetName, h)),
            uuid=_text(_try(nv.nvmlDeviceGetUUID, h)),
            util_percent=_num(getattr(util, "gpu", None)),
            mem_copy_util_percent=_num(getattr(util, "memory", None)),
            mem_used_mib=_num(getattr(mem, "used", None), 1 / MIB),
            mem_free_mib=_num(getattr(mem, "free", None), 1 / MIB),
            mem_total_mib=_num(getattr(mem, "total", None), 1 / MIB),
            power_w=_num(_try(nv.nvmlDeviceGetPowerUsage, h), 1e-3),
            power_limit_w=_num(limit, 1e-3),
            sm_clock_mhz=_num(_try(nv.nvmlDeviceGetClockInfo, h, sm)),
            sm_clock_max_mhz=_num(_try(nv.nvmlDeviceGetMaxClockInfo, h, sm)),
            temp_c=_num(_try(nv.nvmlDeviceGetTemperature, h, temp_sensor)),
            throttle_reasons=throttle_names(_num(self._reasons(h))),
            processes=self._processes(i, h),
        )

    def _reasons(self, h: Any) -> Any:
        nv = self.nv
        for name in (
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ):
            fn = getattr(nv, name, None)
            got = _try(fn, h) if fn is not None else None
            if got is not None:
                return got
        return None

    def _processes(self, i: int, h: Any) -> tuple[GpuProcess, ...]:
        nv = self.nv
        assert nv is not None
        running = _try(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
        sm_by_pid = self._sm_by_pid(i, h)
        out = []
        for p in list(running)[:MAX_PROCESSES]:
            pid = getattr(p, "pid", None)
            if not isinstance(pid, int):
                continue
            name = _text(_try(nv.nvmlSystemGetProcessName, pid)) or f"pid {pid}"
            used = getattr(p, "usedGpuMemory", None)
            out.append(
                GpuProcess(
                    name=name,
                    kind="process",
                    pid=pid,
                    mem_used_mib=_num(used, 1 / MIB),
                    sm_percent=sm_by_pid.get(pid),
                )
            )
        out.sort(key=lambda p: -(p.mem_used_mib or 0.0))
        return tuple(out)

    def _sm_by_pid(self, i: int, h: Any) -> dict[int, float]:
        """SM share per process over the samples since the last read (NVML keeps a buffer)."""
        fn = getattr(self.nv, "nvmlDeviceGetProcessUtilization", None)
        samples = _try(fn, h, self._seen_us.get(i, 0)) if fn is not None else None
        best: dict[int, tuple[int, float]] = {}
        for s in samples or []:
            pid, sm = getattr(s, "pid", None), getattr(s, "smUtil", None)
            stamp = getattr(s, "timeStamp", 0)
            if not (isinstance(pid, int) and isinstance(sm, (int, float)) and 0 <= sm <= 100):
                continue
            if pid not in best or stamp >= best[pid][0]:
                best[pid] = (int(stamp), float(sm))
        if best:
            self._seen_us[i] = max(stamp for stamp, _ in best.values())
        return {pid: sm for pid, (_, sm) in best.items()}


def _error(exc: BaseException) -> str:
    return clean(str(exc) or type(exc).__name__, 120)
