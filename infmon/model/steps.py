"""The one step model: a step is a load level held for a while, for bench, monitor, sweep and
reports alike.

A step has one or more *segments*: it starts a segment when its level is applied and again on
each resume after a pause, and each segment measures from the end of its warm-up to its end.
Paused time is therefore never inside a step's measured time. Returning to a level held before
makes a new step that names the earlier one (``revisit_of``). A level changed again within
``coalesce_s`` of its start (quick key presses), or set while paused before the step ever
ran, replaces that step instead of leaving a junk one behind.

Every change is a ``StepEvent``; ``StepBook.apply`` is the only way the book changes, so the
live session and a report replaying the journal's events build the same steps.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

CLOSED, RATE, REPLAY = "closed", "rate", "replay"
"""Closed loop (``value`` streams), open loop (``value`` req/s), or a trace/schedule replayed."""


@dataclass(frozen=True, slots=True)
class Level:
    """A load level: ``value`` streams in flight (closed loop) or requests/s (rate)."""

    mode: str
    value: float

    @property
    def concurrency(self) -> int | None:
        return int(self.value) if self.mode == CLOSED else None

    @property
    def rate(self) -> float | None:
        return float(self.value) if self.mode == RATE else None

    @property
    def label(self) -> str:
        if self.mode == REPLAY:
            return "replay"
        return f"c={self.value:g}" if self.mode == CLOSED else f"{self.value:g} req/s"


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of a step while it ran: ``[measure_from_s, end_s)`` is measured."""

    start_s: float
    measure_from_s: float
    end_s: float | None = None
    """None while the segment runs."""

    def measured_s(self, now: float) -> float:
        end = self.end_s if self.end_s is not None else now
        return max(0.0, end - self.measure_from_s)

    def measures(self, t: float) -> bool:
        end = self.end_s if self.end_s is not None else math.inf
        return self.measure_from_s <= t < end


@dataclass(frozen=True, slots=True)
class StepSpan:
    """A step as the book holds it (immutable: every change replaces it)."""

    index: int
    level: Level
    origin: str
    """Who set the level: ``bench``, ``operator``, ``sweep`` or ``hold`` (the sweep's verdict)."""
    segments: tuple[Segment, ...]
    revisit_of: int | None = None
    ended: bool = False

    @property
    def start_s(self) -> float:
        return self.segments[0].start_s

    @property
    def end_s(self) -> float | None:
        """When the step ended; None while it runs (or is paused)."""
        return self.segments[-1].end_s if self.ended else None

    @property
    def measure_from_s(self) -> float:
        return self.segments[0].measure_from_s

    @property
    def paused(self) -> bool:
        return not self.ended and self.segments[-1].end_s is not None

    def measured_s(self, now: float) -> float:
        """Measured time: warm-ups and paused time excluded."""
        return sum(s.measured_s(now) for s in self.segments)

    def held_s(self, now: float) -> float:
        """Time the level was applied (warm-ups included, pauses excluded)."""
        total = 0.0
        for s in self.segments:
            end = s.end_s if s.end_s is not None else now
            total += max(0.0, end - s.start_s)
        return total

    def measures(self, t: float) -> bool:
        """Does a request sent (or a chunk received) at ``t`` fall in the measured time?"""
        return any(s.measures(t) for s in self.segments)

    def measures_many(self, t: np.ndarray) -> np.ndarray:
        """``measures`` of many times at once."""
        inside = np.zeros(t.shape, dtype=bool)
        for lo, hi in self.windows():
            inside |= (t >= lo) & (t < hi)
        return inside

    def windows(self) -> tuple[tuple[float, float], ...]:
        """The measured intervals (an open end is +inf)."""
        return tuple(
            (s.measure_from_s, s.end_s if s.end_s is not None else math.inf) for s in self.segments
        )


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One change to the book; its ``payload()`` is what the journal keeps."""

    kind: str
    """``begin``, ``pause``, ``resume`` or ``end``."""
    index: int
    t: float
    mode: str | None = None
    level: float | None = None
    origin: str | None = None
    warmup_s: float = 0.0
    revisit_of: int | None = None

    def payload(self) -> dict[str, Any]:
        d: dict[str, Any] = {"index": self.index, "t": self.t}
        if self.kind == "begin":
            d.update(mode=self.mode, level=self.level, origin=self.origin)
            if self.revisit_of is not None:
                d["revisit_of"] = self.revisit_of
        if self.kind in ("begin", "resume"):
            d["warmup_s"] = self.warmup_s
        return d

    @classmethod
    def from_payload(cls, kind: str, d: Mapping[str, Any]) -> StepEvent | None:
        """The event back from a journal line (None when the line is not a usable one)."""
        index, t = d.get("index"), d.get("t")
        if not isinstance(index, int) or not isinstance(t, (int, float)):
            return None
        level = d.get("level")
        revisit = d.get("revisit_of")
        return cls(
            kind=kind,
            index=index,
            t=float(t),
            mode=d.get("mode") if isinstance(d.get("mode"), str) else None,
            level=float(level) if isinstance(level, (int, float)) else None,
            origin=d.get("origin") if isinstance(d.get("origin"), str) else None,
            warmup_s=float(d.get("warmup_s") or 0.0),
            revisit_of=revisit if isinstance(revisit, int) else None,
        )


EVENT_KINDS = {
    "step_begin": "begin",
    "step_pause": "pause",
    "step_resume": "resume",
    "step_end": "end",
}
"""Journal event kind → ``StepEvent.kind``."""
JOURNAL_KIND = {v: k for k, v in EVENT_KINDS.items()}


class StepBook:
    """The steps of a session, changed only through ``apply`` (see the module docstring)."""

    def __init__(self, coalesce_s: float = 1.0) -> None:
        self.coalesce_s = coalesce_s
        self._steps: dict[int, StepSpan] = {}
        self._order: list[int] = []
        self._starts: list[float] = []
        """Start time of each step in ``_order`` (non-decreasing)."""

    # ---- decisions (each returns the event it applied) ----------------------------------------
    def begin(self, level: Level, now: float, origin: str, warmup_s: float) -> list[StepEvent]:
        """A new level: ends the running step (or replaces it while it is still young)."""
        events: list[StepEvent] = []
        cur = self.current
        index = self.next_index
        if cur is not None:
            young = not cur.paused and now - cur.start_s < self.coalesce_s
            never_ran = cur.paused and cur.held_s(now) == 0.0
            if (young or never_ran) and len(cur.segments) == 1:
                index = cur.index
            else:
                events.append(self.apply(StepEvent("end", cur.index, now)))
        revisit = self._earlier_at(level, index)
        begin = StepEvent("begin", index, now, level.mode, level.value, origin, warmup_s, revisit)
        events.append(self.apply(begin))
        return events

    def pause(self, now: float) -> list[StepEvent]:
        cur = self.current
        if cur is None or cur.paused:
            return []
        return [self.apply(StepEvent("pause", cur.index, now))]

    def resume(self, now: float, warmup_s: float) -> list[StepEvent]:
        cur = self.current
        if cur is None or not cur.paused:
            return []
        return [self.apply(StepEvent("resume", cur.index, now, warmup_s=warmup_s))]

    def end(self, now: float) -> list[StepEvent]:
        cur = self.current
        if cur is None:
            return []
        return [self.apply(StepEvent("end", cur.index, now))]

    # ---- the one mutation ---------------------------------------------------------------------
    def apply(self, ev: StepEvent) -> StepEvent:
        """Apply one event (live, or replayed from a journal); returns it."""
        span = self._steps.get(ev.index)
        if ev.kind == "begin":
            level = Level(ev.mode or CLOSED, ev.level if ev.level is not None else 0.0)
            seg = Segment(ev.t, ev.t + ev.warmup_s)
            new = StepSpan(ev.index, level, ev.origin or "operator", (seg,), ev.revisit_of)
            if span is None:
                self._order.append(ev.index)
                self._starts.append(ev.t)
            else:
                self._starts[self._order.index(ev.index)] = ev.t
            self._steps[ev.index] = new
        elif span is not None and not span.ended:
            self._steps[ev.index] = _changed(span, ev)
        return ev

    def replay(self, events: Iterable[StepEvent]) -> StepBook:
        for ev in events:
            self.apply(ev)
        return self

    # ---- queries ------------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[StepSpan, ...]:
        return tuple(self._steps[i] for i in self._order)

    @property
    def current(self) -> StepSpan | None:
        """The step that has not ended (running or paused), if any."""
        if not self._order:
            return None
        last = self._steps[self._order[-1]]
        return None if last.ended else last

    @property
    def next_index(self) -> int:
        return (self._order[-1] + 1) if self._order else 1

    def get(self, index: int) -> StepSpan | None:
        return self._steps.get(index)

    def latest_started_by(self, t: float) -> Iterator[StepSpan]:
        """The steps that began at or before ``t``, newest first (steps begin in order)."""
        for k in range(bisect_right(self._starts, t) - 1, -1, -1):
            yield self._steps[self._order[k]]

    def _earlier_at(self, level: Level, index: int) -> int | None:
        for i in self._order:
            s = self._steps[i]
            if i != index and s.level == level:
                return s.revisit_of if s.revisit_of is not None else s.index
        return None


def _changed(span: StepSpan, ev: StepEvent) -> StepSpan:
    segs = list(span.segments)
    last = segs[-1]
    if ev.kind == "pause" and last.end_s is None:
        segs[-1] = replace(last, end_s=ev.t)
    elif ev.kind == "resume" and last.end_s is not None:
        segs.append(Segment(ev.t, ev.t + ev.warmup_s))
    elif ev.kind == "end":
        if last.end_s is None:
            segs[-1] = replace(last, end_s=max(ev.t, last.start_s))
        return replace(span, segments=tuple(segs), ended=True)
    return replace(span, segments=tuple(segs))
