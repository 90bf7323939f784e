"""The one step model: a step is a load level held for a while, for bench, monitor, sweep and
reports alike.

A step has one or more *segments*: it starts a segment when its level is applied and again on
each resume after a pause, and each segment measures from the end of its warm-up to its end.
Paused time is therefore never inside a step's measured time. Returning to a level held before
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Literal, TypedDict, TypeGuard

import numpy as np

if TYPE_CHECKING:
    from infmon.model.steps.gathering import ClientCheckPayload

Mode = Literal["closed", "rate", "replay"]
CLOSED: Final = "closed"
RATE: Final = "rate"
REPLAY: Final = "replay"
"""Closed loop (``value`` streams), open loop (``value`` req/s), or a trace/schedule replayed."""
MODES: tuple[Mode, ...] = (CLOSED, RATE, REPLAY)

EventKind = Literal["begin", "pause", "resume", "end", "settle"]
EVENT_KIND_NAMES: tuple[EventKind, ...] = ("begin", "pause", "resume", "end", "settle")


def is_mode(x: object) -> TypeGuard[Mode]:
    return x in MODES


@dataclass(frozen=True, slots=True)
class Level:
    """A load level: ``value`` streams in flight (closed loop) or requests/s (rate)."""

    mode: Mode
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
    """+inf while the step is settling (``starts_clean``): nothing is measured yet."""
    end_s: float | None = None
    """None while the segment runs."""
    warmup_s: float = 0.0
    """The warm-up that follows the clean start (kept for the ``settle`` event)."""

    @property
    def settling(self) -> bool:
        return math.isinf(self.measure_from_s)

    def measured_s(self, now: float) -> float:
        end = self.end_s if self.end_s is not None else now
        return 0.0 if self.settling else max(0.0, end - self.measure_from_s)

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

    @property
    def settling(self) -> bool:
        """Still waiting for a clean start (see ``starts_clean``)."""
        return self.segments[-1].settling

    @property
    def transition(self) -> bool:
        """Ended without ever starting clean: the load moved between levels all along."""
        return self.ended and all(s.settling for s in self.segments)

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

    def overlaps(self, t0: float, t1: float) -> Iterator[tuple[int, float, float, float]]:
        """The parts of ``[t0, t1)`` inside the measured time, one per segment it meets:
        ``(segment, the segment's measured start, the part's start, its end)``, each part of
        positive length. How a load window's tokens are shared among steps (the ledger) and
        among a step's bins (``infmon.model.steps.step_levels``)."""
        for seg, (lo, hi) in enumerate(self.windows()):
            start, end = max(t0, lo), min(t1, hi)
            if end - start > 0:
                yield seg, lo, start, end


class StepPayload(TypedDict, total=False):
    """A step event as the journal keeps it (``StepEvent.payload``): ``index`` and ``t`` always,
    the level on a ``begin``, the warm-up on a ``begin``/``resume``/``settle``, ``clean``
    only when False; ``stats`` on an ``end`` (the client's check, added by the run's wiring)."""

    index: int
    t: float
    mode: Mode | None
    level: float | None
    origin: str | None
    revisit_of: int
    warmup_s: float
    clean: bool
    stats: ClientCheckPayload


@dataclass(frozen=True, slots=True)
class StepEvent:
    """One change to the book; its ``payload()`` is what the journal keeps."""

    kind: EventKind
    """``begin``, ``pause``, ``resume``, ``end`` or ``settle`` (the clean start)."""
    index: int
    t: float
    mode: Mode | None = None
    level: float | None = None
    origin: str | None = None
    warmup_s: float = 0.0
    revisit_of: int | None = None
    clean: bool = True
    """``begin``/``resume``: measured from ``t`` + warm-up; False: from a later ``settle``."""

    def payload(self) -> StepPayload:
        d: StepPayload = {"index": self.index, "t": self.t}
        if self.kind == "begin":
            d.update({"mode": self.mode, "level": self.level, "origin": self.origin})
            if self.revisit_of is not None:
                d["revisit_of"] = self.revisit_of
        if self.kind in ("begin", "resume", "settle"):
            d["warmup_s"] = self.warmup_s
        if not self.clean and self.kind in ("begin", "resume"):
            d["clean"] = False
        return d

    @classmethod
    def from_payload(cls, kind: EventKind, d: Mapping[str, Any]) -> StepEvent | None:
        """The event back from a journal line (None when the line is not a usable one)."""
        index, t = d.get("index"), d.get("t")
        if not isinstance(index, int) or not isinstance(t, (int, float)):
            return None
        level = d.get("level")
        revisit = d.get("revisit_of")
        mode = d.get("mode")
        return cls(
            kind=kind,
            index=index,
            t=float(t),
            mode=mode if is_mode(mode) else None,
            level=float(level) if isinstance(level, (int, float)) else None,
            origin=d.get("origin") if isinstance(d.get("origin"), str) else None,
            warmup_s=float(d.get("warmup_s") or 0.0),
            revisit_of=revisit if isinstance(revisit, int) else None,
            clean=d.get("clean") is not False,
        )


EVENT_KINDS: dict[str, EventKind] = {f"step_{k}": k for k in EVENT_KIND_NAMES}
"""Journal event kind → ``StepEvent.kind``."""
JOURNAL_KIND: dict[EventKind, str] = {v: k for k, v in EVENT_KINDS.items()}


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
