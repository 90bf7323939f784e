"""The simulator's virtual GPU as a DCGM exporter shows it (``GET /gpu-metrics``, or ``/metrics``
on ``--dcgm-port``): the default counters' names, HELP texts and label set of dcgm-exporter on
Kubernetes (``gpu``, ``UUID``, ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, then the
holding pod's ``container``, ``namespace``, ``pod``).

Values come from the engine's steps over the last second (DCGM samples its profiling fields at
1 Hz): graphics-engine activity is the steps' kernel time (``roofline.kernel_time_s``: no host
work) over the window, DRAM activity the bytes they moved over the card's bandwidth, tensor
activity their FLOPs over its dense BF16 peak; power follows activity between the board's idle
draw and its limit. Memory used is vLLM's ``gpu_memory_utilization`` share of the card.

With contention (the ``contention`` scenario, ``--contention F``) a second process shares the
GPU, as a time-sliced pod: it takes ``F / (1 + F)`` of the SM time (the engine's steps already
run ``1 + F`` times longer) and ``NEIGHBOUR_MIB`` of memory. The page then has the layout of
dcgm-exporter 4.6 with ``--kubernetes-virtual-gpus``: ``FB_USED`` and ``GPU_UTIL`` for the device
and split per pod (with a ``vgpu`` label), every other field copied to each pod.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass

from infmon.sim.engine import StepOutput
from infmon.sim.memory import MemoryBudget
from infmon.sim.roofline import EngineConfig

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
WINDOW_S = 1.0
NEIGHBOUR_MIB = 3174.0
"""3.1 GiB: a small training or embedding job sharing the card."""
NEIGHBOUR_DRAM_SHARE = 0.5
"""The neighbour's DRAM activity per unit of its SM share."""

HELP = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("gauge", "Power management limit (in W)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("gauge", "Current clock throttle reasons."),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    "DCGM_FI_PROF_DRAM_ACTIVE": (
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
}


@dataclass(frozen=True, slots=True)
class Holder:
    pod: str
    namespace: str
    container: str


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A second process on the GPU: its pod, its share of SM time and its memory."""

    holder: Holder
    sm_share: float
    mem_mib: float = NEIGHBOUR_MIB

    @classmethod
    def for_contention(cls, contention: float) -> Neighbour | None:
        if contention <= 0:
            return None
        return cls(Holder("noisy-neighbour-0", "batch", "train"), contention / (1.0 + contention))


@dataclass(frozen=True, slots=True)
class GpuSample:
    """The virtual GPU over the last window."""

    server_active: float
    neighbour_active: float
    dram_active: float
    tensor_active: float
    power_w: float | None
    sm_clock_mhz: float | None
    temp_c: float | None
    server_mib: float
    neighbour_mib: float
    total_mib: float

    @property
    def engine_active(self) -> float:
        return min(1.0, self.server_active + self.neighbour_active)


class DcgmSeries:
    """Collects the engine's steps; renders the exporter's page for the time asked."""

    def __init__(
        self,
        cfg: EngineConfig,
        budget: MemoryBudget,
        *,
        server: Holder | None = None,
        hostname: str = "infmon-sim",
        neighbour: Neighbour | None = None,
    ) -> None:
        self.cfg, self.budget = cfg, budget
        self.server = server or Holder("infmon-sim-0", "default", "vllm")
        self.hostname = hostname
        self.neighbour = neighbour
        seed = f"infmon-sim/{hostname}/{self.server.pod}/{cfg.seed}"
        self.uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, seed)}"
        self._steps: deque[tuple[float, float, float, float]] = deque(maxlen=100_000)

    def on_step(self, out: StepOutput) -> None:
        """One engine step: its end, kernel time, bytes moved and FLOPs."""
        if out.end_s > out.start_s:
            moved = out.read_bytes + out.write_bytes
            self._steps.append((out.end_s, out.kernel_s, moved, out.flops))

    def sample(self, now_s: float) -> GpuSample:
        while self._steps and self._steps[0][0] < now_s - 10 * WINDOW_S:
            self._steps.popleft()
        kernel = moved = flops = 0.0
        for end, k, b, f in self._steps:
            if now_s - WINDOW_S < end <= now_s:
                kernel, moved, flops = kernel + k, moved + b, flops + f
        gpu, nb = self.cfg.gpu, self.neighbour
        share = nb.sm_share if nb is not None else 0.0
        server = min(1.0 - share, kernel / WINDOW_S)
        peak_bytes = gpu.bandwidth_gb_s * 1e9 * WINDOW_S
        dram = min(1.0, moved / peak_bytes + share * NEIGHBOUR_DRAM_SHARE)
        tensor = min(1.0, flops / (gpu.bf16_tflops * 1e12 * WINDOW_S))
        power = None
        if gpu.power_limit_w is not None:
            idle = gpu.idle_power_w if gpu.idle_power_w is not None else 0.1 * gpu.power_limit_w
            load = min(1.0, 0.55 * (server + share) + 0.45 * dram)
            power = idle + (gpu.power_limit_w - idle) * load
        temp = (
            None if power is None or not gpu.power_limit_w else 30 + 50 * power / gpu.power_limit_w
        )
        return GpuSample(
            server_active=server,
            neighbour_active=share,
            dram_active=dram,
            tensor_active=tensor,
            power_w=power,
            sm_clock_mhz=gpu.max_sm_clock_mhz,
            temp_c=temp,
            server_mib=self.budget.requested_gib * 1024.0,
            neighbour_mib=nb.mem_mib if nb is not None else 0.0,
            total_mib=gpu.memory_gib * 1024.0,
        )

    def render(self, now_s: float) -> bytes:
        s = self.sample(now_s)
        device = {
            "gpu": "0",
            "UUID": self.uuid,
            "pci_bus_id": "00000000:01:00.0",
            "device": "nvidia0",
            "modelName": f"NVIDIA {self.cfg.gpu.name.replace('-', ' ')}",
            "Hostname": self.hostname,
        }
        used = s.server_mib + s.neighbour_mib
        values: dict[str, float | None] = {
            "DCGM_FI_DEV_SM_CLOCK": s.sm_clock_mhz,
            "DCGM_FI_DEV_GPU_TEMP": s.temp_c,
            "DCGM_FI_DEV_POWER_USAGE": s.power_w,
            "DCGM_FI_DEV_POWER_MGMT_LIMIT": self.cfg.gpu.power_limit_w,
            "DCGM_FI_DEV_GPU_UTIL": round(100 * s.engine_active),
            "DCGM_FI_DEV_FB_FREE": max(0.0, s.total_mib - used),
            "DCGM_FI_DEV_FB_USED": used,
            "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0.0,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": s.engine_active,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": s.tensor_active,
            "DCGM_FI_PROF_DRAM_ACTIVE": s.dram_active,
        }
        own = {
            "DCGM_FI_DEV_FB_USED": (s.server_mib, s.neighbour_mib),
            "DCGM_FI_DEV_GPU_UTIL": (100 * s.server_active, 100 * s.neighbour_active),
        }
        lines: list[str] = []
        for name, value in values.items():
            if value is None:
                continue
            kind, text = HELP[name]
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            lines += self._series(name, value, own.get(name), device)
        return ("\n".join(lines) + "\n").encode()

    def _series(
        self,
        name: str,
        value: float,
        split: tuple[float, float] | None,
        device: dict[str, str],
    ) -> list[str]:
        holders = [self.server] + ([self.neighbour.holder] if self.neighbour else [])
        shared = len(holders) > 1
        out = []
        if shared and split is not None:
            out.append(_line(name, device, value))
        for i, h in enumerate(holders):
            labels = {**device, "container": h.container, "namespace": h.namespace, "pod": h.pod}
            if shared:
                labels["vgpu"] = str(i)
            v = split[i] if shared and split is not None else value
            out.append(_line(name, labels, v))
        return out


def _line(name: str, labels: dict[str, str], value: float) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    text = (
        f"{value:.6f}"
        if name in ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT")
        or name.startswith("DCGM_FI_PROF_")
        else f"{round(value)}"
    )
    return f"{name}{{{inner}}} {text}"
