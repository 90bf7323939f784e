"""Open-loop arrival schedules: ramps and bursts as a list of send times.

``ramp:A-B/DUR`` sends at a rate rising linearly from A to B requests/s over DUR (e.g.
``ramp:1-20/60s``); ``burst:N@T`` sends N requests at once T after the start (``burst:50@10s``);
``rate:R/DUR`` holds R requests/s for DUR. Parts joined with ``+`` run one after another
(``ramp:1-10/30s+burst:40@0s+rate:10/30s``): each part's times start where the previous
part ended. Within a rate, requests are evenly spaced (deterministic, so a rerun is the same).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_ARRIVALS = 1_000_000

_DUR = r"([0-9]*\.?[0-9]+)(ms|s|m)?"
_RAMP = re.compile(rf"^ramp:([0-9]*\.?[0-9]+)-([0-9]*\.?[0-9]+)/{_DUR}$")
_BURST = re.compile(rf"^burst:(\d+)@{_DUR}$")
_RATE = re.compile(rf"^rate:([0-9]*\.?[0-9]+)/{_DUR}$")


class ScheduleError(ValueError):
    """A schedule spec that cannot be used; the message is one line."""


@dataclass(frozen=True, slots=True)
class Schedule:
    spec: str
    times_s: tuple[float, ...]
    """Send times in seconds after the schedule starts, non-decreasing."""
    span_s: float


def _seconds(value: str, unit: str | None) -> float:
    return float(value) * {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[unit]


def ramp_times(r0: float, r1: float, span_s: float) -> list[float]:
    """Times where the cumulative count of a linear rate r(t) reaches 1, 2, ...: the k-th
    arrival solves r0·t + (r1 − r0)·t²/(2·span) = k."""
    total = (r0 + r1) / 2 * span_s
    slope = (r1 - r0) / span_s if span_s > 0 else 0.0
    out = []
    for k in range(1, math.floor(total + 1e-9) + 1):
        if abs(slope) < 1e-12:
            t = k / r0
        else:
            t = (-r0 + math.sqrt(max(0.0, r0 * r0 + 2 * slope * k))) / slope
        out.append(min(t, span_s))
    return out


def parse_schedule(text: str) -> Schedule:
    spec = str(text).strip().lower().replace(" ", "")
    times: list[float] = []
    offset = 0.0
    for part in spec.split("+"):
        if m := _RAMP.match(part):
            r0, r1, span = float(m[1]), float(m[2]), _seconds(m[3], m[4])
            if span <= 0 or max(r0, r1) <= 0:
                raise ScheduleError(f"bad ramp {part!r}: need a positive rate and duration")
            times += [offset + t for t in ramp_times(r0, r1, span)]
            offset += span
        elif m := _BURST.match(part):
            at = offset + _seconds(m[2], m[3])
            times += [at] * int(m[1])
            offset = at
        elif m := _RATE.match(part):
            rate, span = float(m[1]), _seconds(m[2], m[3])
            if rate <= 0 or span <= 0:
                raise ScheduleError(f"bad rate {part!r}: need a positive rate and duration")
            times += [offset + k / rate for k in range(1, int(rate * span + 1e-9) + 1)]
            offset += span
        else:
            raise ScheduleError(
                f"not a schedule part: {part!r} (use ramp:1-20/60s, burst:50@10s or rate:5/30s, "
                "joined with +)"
            )
        if len(times) > MAX_ARRIVALS:
            raise ScheduleError(f"schedule {spec!r} has more than {MAX_ARRIVALS} arrivals")
    if not times:
        raise ScheduleError(f"schedule {spec!r} sends nothing")
    times.sort()
    return Schedule(spec, tuple(times), max(offset, times[-1]))
