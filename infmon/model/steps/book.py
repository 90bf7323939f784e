"""The one step model: a step is a load level held for a while, for bench, monitor, sweep and
reports alike. This module holds the step book, the steps of a session; a step's span and the
events that change the book are in ``infmon.model.steps.span``.

The book starts a step's segment when its level is applied and another on each resume after a
pause, so paused time is never inside a step's measured time. Returning to a level held before
makes a new step that names the earlier one (``revisit_of``). A level changed again within
``coalesce_s`` of its start (quick key presses), or set while paused before the step ever
ran, replaces that step instead of leaving a junk one behind.

A step starts clean (``starts_clean``): after a level change its measured time begins only once
the old level's streams have finished (a decrease, or a change of mode) or the new streams are
all running (an increase), plus its warm-up. Until then the step is *settling*; the ledger says
when it is clean with a ``settle`` event. A step that ends still settling is a *transition*:
shown, never measured, never in the knee. So no step measures another level's streams.

Every change is a ``StepEvent``; ``StepBook.apply`` is the only way the book changes, so the
live session and a report replaying the journal's events build the same steps.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace

from infmon.model.steps.span import CLOSED, RATE, REPLAY, Level, Segment, StepEvent, StepSpan


def starts_clean(
    before: Level | None, level: Level, inflight: Mapping[int, int], index: int
) -> bool:
    """Is step ``index`` at ``level`` clean, with ``inflight`` requests in flight per step tag?

    Clean when no request of an earlier step is in flight (the old level's streams have
    finished), or, on an increase within a mode, when the new streams are all running
    (closed loop: the step's own streams started and ``level`` in flight, within a stream or
    1 % caught between a request and its successor, no more earlier ones than that; open
    loop: at once, since the arrivals continue). A decrease or a change of mode waits for the old streams: until then the
    server serves more than the level, and the step would measure them."""
    earlier = sum(n for step, n in inflight.items() if step < index)
    if earlier <= 0 or before is None:
        return True
    if before.mode != level.mode or level.value < before.value or level.mode == REPLAY:
        return False
    if level.mode == RATE:
        return True
    own, total = inflight.get(index, 0), sum(inflight.values())
    slack = max(1.0, level.value // 100)  # a stream between its request and the next one
    return own > 0 and earlier <= level.value <= total + slack


class StepBook:
    """The steps of a session, changed only through ``apply`` (see the module docstring)."""

    def __init__(self, coalesce_s: float = 1.0) -> None:
        self.coalesce_s = coalesce_s
        self._steps: dict[int, StepSpan] = {}
        self._order: list[int] = []
        self._starts: list[float] = []
        """Start time of each step in ``_order`` (non-decreasing)."""

    # ---- decisions (each returns the event it applied) ----------------------------------------
    def begin(
        self,
        level: Level,
        now: float,
        origin: str,
        warmup_s: float,
        inflight: Mapping[int, int] | None = None,
    ) -> list[StepEvent]:
        """A new level: ends the running step (or replaces it while it is still young).
        ``inflight``: requests in flight per step tag now (None: unknown, taken as clean)."""
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
        clean = self._clean(level, index, inflight)
        begin = StepEvent(
            "begin", index, now, level.mode, level.value, origin, warmup_s, revisit, clean
        )
        events.append(self.apply(begin))
        return events

    def pause(self, now: float) -> list[StepEvent]:
        cur = self.current
        if cur is None or cur.paused:
            return []
        return [self.apply(StepEvent("pause", cur.index, now))]

    def resume(
        self, now: float, warmup_s: float, inflight: Mapping[int, int] | None = None
    ) -> list[StepEvent]:
        cur = self.current
        if cur is None or not cur.paused:
            return []
        clean = self._clean(cur.level, cur.index, inflight)
        return [self.apply(StepEvent("resume", cur.index, now, warmup_s=warmup_s, clean=clean))]

    def settle(self, now: float, inflight: Mapping[int, int]) -> list[StepEvent]:
        """The running step's clean start, once ``inflight`` says it is clean (else none)."""
        cur = self.current
        if cur is None or cur.paused or not cur.settling:
            return []
        if not self._clean(cur.level, cur.index, inflight):
            return []
        warmup_s = cur.segments[-1].warmup_s
        return [self.apply(StepEvent("settle", cur.index, now, warmup_s=warmup_s))]

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
            seg = _segment(ev)
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

    def measuring(self, t: float) -> StepSpan | None:
        """The step whose measured time holds ``t`` (None: a warm-up, a pause, no step)."""
        return next((s for s in self.latest_started_by(t) if s.measures(t)), None)

    def _clean(self, level: Level, index: int, inflight: Mapping[int, int] | None) -> bool:
        if inflight is None:
            return True
        before = next((s.level for s in reversed(self.steps) if s.index < index), None)
        return starts_clean(before, level, inflight, index)

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
        segs.append(_segment(ev))
    elif ev.kind == "settle" and last.end_s is None and last.settling:
        segs[-1] = replace(last, measure_from_s=max(ev.t, last.start_s) + ev.warmup_s)
    elif ev.kind == "end":
        if last.end_s is None:
            segs[-1] = replace(last, end_s=max(ev.t, last.start_s))
        return replace(span, segments=tuple(segs), ended=True)
    return replace(span, segments=tuple(segs))


def _segment(ev: StepEvent) -> Segment:
    """The segment a ``begin`` or ``resume`` starts (settling when it is not clean)."""
    measure_from = ev.t + ev.warmup_s if ev.clean else math.inf
    return Segment(ev.t, measure_from, warmup_s=ev.warmup_s)
