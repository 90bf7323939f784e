"""A step's span in the session and the events that make it: the load level (``Level``, its
``Mode``), a step's segments and span as the book holds them (``Segment``, ``StepSpan``), and
the ``StepEvent`` that changes the book, with its journal form (``StepPayload``,
``EVENT_KINDS``, ``JOURNAL_KIND``).

A step has one or more *segments*: one starts when its level is applied and again on each
resume after a pause, and each measures from the end of its warm-up to its end, so paused time
is never inside a step's measured time. A segment not yet clean
(``infmon.model.steps.book.starts_clean``) is *settling*: nothing in it is measured until a
``settle`` event. A step that ends still settling is a *transition*: shown, never measured,
never in the knee.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
    """+inf while the step is settling (``book.starts_clean``): nothing is measured yet."""
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
        """Still waiting for a clean start (see ``book.starts_clean``)."""
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
