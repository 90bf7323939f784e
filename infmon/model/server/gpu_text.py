"""What a GPU row says in a line, for the live rules (``infmon.model.live.gpu_rules``) and the
report's steps (``infmon.model.server.gpu_steps``) alike: another holder computing on a serving
GPU (contention), a power or thermal throttle with the SM clock's drop, and the thresholds both
read. Pure text over ``GpuRow``s.
"""

from __future__ import annotations

import math

from infmon.model.server.gpu_state import GpuRow, HolderView

OTHER_SM_MIN_PERCENT = 5.0
IDLE_ACTIVITY = 0.3
LATENCY_RISE = 1.5
CLOCK_DROP_MIN = 0.03
POWER_LIMIT_FRACTION = 0.98


def _ok(x: float) -> bool:
    return not math.isnan(x)


def gib(x: float) -> str:
    return f"{x:.1f} GiB" if _ok(x) else "memory unknown"


def holder_text(h: HolderView) -> str:
    sm = f"SM {h.sm_percent:.0f}%" if _ok(h.sm_percent) else "SM unknown"
    return f"{h.label}: {gib(h.mem_gib)}, {sm}"


def busiest_other(rows: tuple[GpuRow, ...]) -> tuple[GpuRow, HolderView] | None:
    """The other holder with the largest SM share on a serving GPU (at least the minimum)."""
    found = [
        (r, h)
        for r in rows
        if r.serving
        for h in r.others
        if _ok(h.sm_percent) and h.sm_percent >= OTHER_SM_MIN_PERCENT
    ]
    return max(found, key=lambda rh: rh[1].sm_percent) if found else None


def contention_text(rows: tuple[GpuRow, ...]) -> str | None:
    """ "GPU contention: another pod … on GPU 0 (…: 3.1 GiB, SM 40%)" when another holder
    computes on a serving GPU (live rows, or a step's mean rows in a report)."""
    found = busiest_other(rows)
    if found is None:
        return None
    row, h = found
    return f"GPU contention: another {h.kind} on {row.label} ({holder_text(h)})"


def _clock_text(r: GpuRow) -> tuple[str, float]:
    clock, peak = r.sm_clock_mhz, r.sm_clock_peak_mhz
    if not _ok(clock):
        return "SM clock unknown", math.nan
    if _ok(peak) and peak > 0 and clock < peak * (1 - CLOCK_DROP_MIN):
        drop = 1 - clock / peak
        return f"SM clock {peak:,.0f} → {clock:,.0f} MHz (−{drop:.0%})", drop
    return f"SM clock {clock:,.0f} MHz", 0.0


def throttle_text(rows: tuple[GpuRow, ...]) -> str | None:
    """A power or thermal throttle of the first such GPU among ``rows``, with its clock drop;
    else a GPU at its power limit whose clock fell at least 10%."""
    for r in rows:
        clock, drop = _clock_text(r)
        if r.throttle:
            power = any("power" in x for x in r.throttle)
            thermal = any("thermal" in x or "slowdown" in x for x in r.throttle)
            word = "power-throttled" if power and not thermal else "thermal-throttled"
            word = "power- and thermal-throttled" if power and thermal else word
            more = sum(1 for x in rows if x.throttle) - 1
            tail = f"; {more} more GPU(s) throttled" if more > 0 else ""
            return f"{r.label} {word} ({', '.join(r.throttle)}): {clock}{tail}"
        at_limit = _ok(r.power_w) and _ok(r.power_limit_w) and r.power_limit_w > 0
        if at_limit and r.power_w >= POWER_LIMIT_FRACTION * r.power_limit_w and drop >= 0.1:
            return (
                f"{r.label} at its power limit ({r.power_w:.0f}/{r.power_limit_w:.0f} W): {clock}"
            )
    return None
