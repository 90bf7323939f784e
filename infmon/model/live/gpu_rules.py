"""Diagnosis from GPU evidence: pure rules over ``GpuEvidence`` (``infmon.model.server.gpu_state``).

- **Contention**: another pod or process computing on a serving GPU (its SM share at least
  ``gpu_text.OTHER_SM_MIN_PERCENT``) is contention, named with its memory and SM share; so is a
  throughput drop at constant load (``diagnose.throughput_drop``) that the server's own generation counter
  shows too (``diagnose.server_drop``: the server generated less, not only the client received
  less) while another holder sits on the serving GPU, or while that GPU stayed busy (the GPU did
  the same work or more, the server got less). A drop the server did not see is no GPU's.
- **Idle GPU while requests wait**: the busiest serving GPU stays below ``IDLE_ACTIVITY`` while
  the client's TTFT p90 climbs (or the server queues): the time goes before the GPU.
- **Throttling**: a power or thermal clocks-event reason (or its violation counter growing) on
  a serving GPU, said with the SM clock's drop from its peak; without reasons, a GPU at its
  power limit whose clock fell.
"""

from __future__ import annotations

import math

from infmon.model.base.units import latency_text
from infmon.model.live.diagnose import Diagnosis, DiagnosisInputs, server_drop, throughput_drop
from infmon.model.server.gpu_state import GpuRow
from infmon.model.server.gpu_text import (
    IDLE_ACTIVITY,
    LATENCY_RISE,
    contention_text,
    holder_text,
    throttle_text,
)

BUSY_ACTIVITY = 0.5
STAYED_BUSY_FRACTION = 0.85
"""Activity now at least this share of its recent peak: the GPU "stayed busy"."""
IDLE_SAMPLES = 5
LATENCY_RISE_MIN_S = 0.05
LATENCY_SAMPLES = 5


def _ok(x: float) -> bool:
    return not math.isnan(x)


def gpu_contention(i: DiagnosisInputs) -> Diagnosis | None:
    ev = i.gpu
    if ev is None or i.paused:
        return None
    text = contention_text(ev.rows)
    if text is not None:
        return Diagnosis("gpu_contention", text)
    drop = throughput_drop(i)
    if drop is None or server_drop(i) is None:
        return None
    idle_others = [(r, h) for r in ev.serving for h in r.others]
    if idle_others:
        row, h = idle_others[0]
        return Diagnosis(
            "gpu_contention",
            f"GPU contention: throughput fell {drop:.0%} at constant load with another "
            f"{h.kind} on {row.label} ({holder_text(h)})",
        )
    busy = _stayed_busy(ev.rows, ev.activity_history)
    if busy is not None:
        return Diagnosis(
            "gpu_contention",
            f"GPU contention: throughput fell {drop:.0%} at constant load while {busy.label} "
            f"stayed busy ({busy.activity_kind} {busy.activity:.0%})",
        )
    return None


def _stayed_busy(rows: tuple[GpuRow, ...], history: tuple[float, ...]) -> GpuRow | None:
    serving = [r for r in rows if r.serving and _ok(r.activity)]
    if not serving:
        return None
    row = max(serving, key=lambda r: r.activity)
    recent = [x for x in history[-30:] if _ok(x)]
    peak = max(recent, default=row.activity)
    if row.activity >= BUSY_ACTIVITY and row.activity >= STAYED_BUSY_FRACTION * peak:
        return row
    return None


def gpu_idle(i: DiagnosisInputs) -> Diagnosis | None:
    ev = i.gpu
    if ev is None or i.paused or not i.inflight_requests:
        return None
    recent = [x for x in ev.activity_history[-IDLE_SAMPLES:] if _ok(x)]
    if len(recent) < IDLE_SAMPLES or max(recent) >= IDLE_ACTIVITY:
        return None
    ttft = [x for x in i.ttft_p90_series[-30:] if _ok(x)]
    rose = False
    if len(ttft) >= LATENCY_SAMPLES:
        low, now = min(ttft), ttft[-1]
        rose = now >= LATENCY_RISE * low and now - low >= LATENCY_RISE_MIN_S
    waiting = _ok(i.server.waiting) and i.server.waiting > 0
    if not (rose or waiting):
        return None
    why = (
        f"TTFT p90 {latency_text(min(ttft))} → {latency_text(ttft[-1])}"
        if rose
        else f"{i.server.waiting:.0f} waiting"
    )
    return Diagnosis(
        "gpu_idle",
        "GPU idle while requests wait: the bottleneck is before the GPU (CPU, tokenizer, API "
        f"server): GPU at most {max(recent):.0%} busy, {why}",
    )


def gpu_throttled(i: DiagnosisInputs) -> Diagnosis | None:
    ev = i.gpu
    if ev is None:
        return None
    text = throttle_text(ev.serving or ev.rows)
    return None if text is None else Diagnosis("gpu_throttle", text)


GPU_RULES = (gpu_contention, gpu_idle, gpu_throttled)
