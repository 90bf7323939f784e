"""Energy per step: the serving GPUs' mean power over a step against its output tokens/s, as
tokens/s per watt and joules per output token. Only where the GPUs report power (DCGM or
NVML); otherwise nothing is said (never a 0). And MFU: vLLM's estimated FLOP/s per GPU over the
GPU's dense BF16 peak, the peak from ``--gpu-peak-tflops`` or the GPU's reported name.

Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Efficiency:
    power_w: float
    """The serving GPUs' mean power summed (all GPUs when none is known to serve)."""
    tok_s_per_w: float
    j_per_token: float
    gpus: int

    def to_dict(self) -> dict[str, float | int | None]:
        def j(x: float, digits: int) -> float | None:
            return round(x, digits) if math.isfinite(x) else None

        return {
            "power_w": j(self.power_w, 1),
            "tok_s_per_w": j(self.tok_s_per_w, 4),
            "j_per_token": j(self.j_per_token, 4),
            "gpus": self.gpus,
        }


def step_efficiency(gpus: Sequence[tuple[float, bool]], output_tok_s: float) -> Efficiency | None:
    """``gpus``: each GPU's mean power over the step (nan: unknown) and whether it serves.
    None when no GPU reported power or the step made no tokens."""
    serving = [w for w, s in gpus if s] or [w for w, _ in gpus]
    known = [w for w in serving if math.isfinite(w) and w > 0]
    if not known or len(known) < len(serving) or not output_tok_s > 0:
        return None
    power = sum(known)
    return Efficiency(power, output_tok_s / power, power / output_tok_s, len(known))


# -- MFU: achieved FLOP/s (vLLM's own estimate) over the GPU's peak -----------------------------

PEAK_BF16_TFLOPS: tuple[tuple[str, float, str], ...] = (
    (r"\bH100\b.*\bPCIE\b", 756.0, "H100 PCIe datasheet: 756 dense BF16 TFLOPs"),
    (r"\bH100\b.*\bNVL\b", 835.0, "H100 NVL datasheet: 835 dense BF16 TFLOPs"),
    (r"\bH100\b", 989.0, "H100 SXM datasheet: 989 dense BF16 TFLOPs"),
    (r"\bH200\b", 989.0, "H200 SXM datasheet: 989 dense BF16 TFLOPs"),
    (r"\bB200\b", 2250.0, "B200 datasheet: 2,250 dense BF16 TFLOPs"),
    (r"\bA100\b", 312.0, "A100 datasheet: 312 dense BF16 TFLOPs"),
    (r"\bL40S\b", 362.05, "L40S datasheet: 362 dense BF16 TFLOPs"),
    (r"\bL4\b", 121.0, "L4 datasheet: 121 dense BF16 TFLOPs"),
    (r"\bRTX 6000 ADA\b", 364.2, "RTX 6000 Ada datasheet: 364 dense BF16 TFLOPs"),
    (r"\bRTX 4090\b", 165.2, "RTX 4090 datasheet: 165 dense BF16 TFLOPs"),
)
"""Dense BF16 tensor peak per GPU, by the GPU's reported name (DCGM ``modelName``, NVML)."""

MFU_UNKNOWN = "MFU unknown: the GPU's peak FLOP/s is not known (give --gpu-peak-tflops)"


def peak_tflops_of(name: str | None) -> tuple[float, str] | None:
    """(dense BF16 TFLOP/s, where that figure comes from) for a known GPU name, else None."""
    if not name:
        return None
    norm = " ".join(name.upper().replace("-", " ").replace("_", " ").split())
    for pattern, tflops, source in PEAK_BF16_TFLOPS:
        if re.search(pattern, norm):
            return tflops, source
    return None


@dataclass(frozen=True, slots=True)
class Peak:
    """The peak one GPU reaches, and why it is believed (a flag, a datasheet)."""

    flops_per_s: float
    source: str


def resolve_peak(flag_tflops: float | None, gpu_names: Sequence[str | None]) -> Peak | None:
    """``--gpu-peak-tflops`` first; else the GPUs' names when they all name one known peak."""
    if flag_tflops is not None and flag_tflops > 0:
        return Peak(flag_tflops * 1e12, "--gpu-peak-tflops")
    peaks = [peak_tflops_of(n) for n in gpu_names]
    first = peaks[0] if peaks else None
    if first is None or any(p != first for p in peaks):
        return None
    return Peak(first[0] * 1e12, first[1])


def mfu(flops_per_s_per_gpu: float | None, peak: Peak | None) -> float | None:
    """Achieved over peak FLOP/s (None when either is unknown)."""
    if flops_per_s_per_gpu is None or peak is None or not math.isfinite(flops_per_s_per_gpu):
        return None
    return flops_per_s_per_gpu / peak.flops_per_s
