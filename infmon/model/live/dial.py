"""The load dial: keys and the automatic sweep turned into level changes. Pure.

One ``LoadDial`` holds the level the operator (or the sweep) wants; ``press`` and ``tick``
return a ``DialChange`` that one controller applies to the load engine, the session and the
journal alike, so the level lives in one place. The sweep holds 1, 2, 4, … and stops when the
knee is confirmed or the SLO is breached, then holds the knee (or the last level within the
SLO).

A sweep step lasts long enough to mean something: ``max(step_s, 3 × the previous level's E2E
p90)`` of *measured* time (after its clean start and warm-up; pauses do not count), so a level
whose requests take longer than ``step_s`` still finishes requests of its own. A step still
settling after that much held time is let go: it ends a transition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infmon.model.steps.knee import SLO_ATTAINMENT, Knee
from infmon.model.steps.result import StepResult
from infmon.model.steps.span import CLOSED, RATE, Level, Mode

NAN = math.nan
E2E_STEPS = 3.0
"""A sweep step lasts at least this many of the previous level's E2E p90."""
RATE_LADDER = (0.1, 0.2, 0.5, 1.0)
"""Rates below 1 req/s step through these; from 1 up the dial moves by 1 req/s."""
MIN_RATE = RATE_LADDER[0]


@dataclass(frozen=True, slots=True)
class DialState:
    mode: Mode
    concurrency: int
    rate: float
    paused: bool

    @property
    def level(self) -> Level:
        return Level(self.mode, self.concurrency if self.mode == CLOSED else self.rate)


@dataclass(frozen=True, slots=True)
class DialChange:
    """What to apply: a new level, a pause state, or both; and who asked (``origin``)."""

    level: Level | None = None
    paused: bool | None = None
    origin: str = "operator"
    note: str = ""
    """Said in the events list (e.g. why the sweep stopped)."""
    verdict: bool = False
    """The sweep stopped on its own finding (knee, SLO, last level): ``note`` is the story's
    end, kept in view."""


@dataclass(frozen=True, slots=True)
class SweepProgress:
    index: int
    """1-based position of the current level in the sweep."""
    total: int
    level: int
    left_s: float


@dataclass(frozen=True, slots=True)
class SweepStep:
    """What the sweep reads of the step it holds."""

    held_s: float
    """Time the level was applied (pauses excluded)."""
    measured_s: float = NAN
    """Measured time (after the clean start and warm-up); nan: as ``held_s``."""
    attainment: float = NAN
    """SLO attainment (nan: no SLO)."""
    settling: bool = False
    """Not clean yet (``infmon.model.steps.book.starts_clean``)."""
    e2el_p90_s: float = NAN

    @property
    def measured(self) -> float:
        return self.held_s if math.isnan(self.measured_s) else self.measured_s


def sweep_step(result: StepResult | None, now: float) -> SweepStep:
    """The sweep's view of a step as the ledger has it (None: no step yet)."""
    if result is None:
        return SweepStep(0.0)
    span, stats = result.span, result.stats
    return SweepStep(
        span.held_s(now),
        span.measured_s(now),
        stats.slo_attainment,
        span.settling,
        stats.e2el.p90,
    )


@dataclass(slots=True)
class _Sweep:
    levels: tuple[int, ...]
    step_s: float
    position: int = 0
    prev_e2el_p90_s: float = NAN

    @property
    def min_s(self) -> float:
        """This step's least measured time: ``max(step_s, 3 × previous E2E p90)``."""
        prev = self.prev_e2el_p90_s
        return self.step_s if math.isnan(prev) else max(self.step_s, E2E_STEPS * prev)

    def done(self, step: SweepStep) -> bool:
        if step.settling:
            return step.held_s >= self.min_s  # never clean: let it go (a transition)
        return step.measured >= self.min_s


def sweep_levels(start: int, max_level: int) -> tuple[int, ...]:
    out, c = [], max(1, start)
    while c <= max_level:
        out.append(c)
        c *= 2
    return tuple(out)


def rate_up(r: float) -> float:
    if r < 1.0:
        return next(x for x in RATE_LADDER if x > r + 1e-9)
    return float(math.floor(r + 1e-9) + 1)


def rate_down(r: float) -> float:
    if r <= 1.0 + 1e-9:
        lower = [x for x in RATE_LADDER if x < r - 1e-9]
        return lower[-1] if lower else MIN_RATE
    return float(math.ceil(r - 1e-9) - 1)


class LoadDial:
    """See the module docstring."""

    def __init__(self, state: DialState, step_s: float, max_level: int = 1024) -> None:
        self.state = state
        self.step_s = step_s
        self.max_level = max_level
        self._sweep: _Sweep | None = None

    @property
    def sweeping(self) -> bool:
        return self._sweep is not None

    # ---- keys -----------------------------------------------------------------------------
    def press(self, action: str, requests_per_s: float = math.nan) -> DialChange | None:
        """A key: ``up``, ``down``, ``double``, ``halve``, ``mode``, ``pause``, ``sweep``."""
        if action == "pause":
            self.state = replace(self.state, paused=not self.state.paused)
            return DialChange(paused=self.state.paused)
        if action == "sweep":
            if self._sweep is None:
                return self._start()
            return self._stop_sweep("stopped by the operator", verdict=False)
        note = ""
        if self._sweep is not None:
            self._sweep, note = None, "sweep stopped: the operator took the dial"
        s = self.state
        if action == "mode":
            if s.mode == CLOSED:
                rate = float(round(requests_per_s)) if requests_per_s >= 1.0 else s.rate
                self.state = replace(s, mode=RATE, rate=rate)
            else:
                self.state = replace(s, mode=CLOSED)
        elif s.mode == CLOSED:
            c = s.concurrency
            c = {"up": c + 1, "down": c - 1, "double": c * 2, "halve": c // 2}[action]
            self.state = replace(s, concurrency=max(1, c))
        else:
            r = s.rate
            if action in ("up", "down"):
                r = rate_up(r) if action == "up" else rate_down(r)
            else:
                r = r * 2 if action == "double" else r / 2
            self.state = replace(s, rate=max(MIN_RATE, round(r, 2)))
        return DialChange(level=self.state.level, note=note)

    def set_level(self, level: Level, origin: str = "operator") -> DialChange:
        self._sweep = None
        if level.mode == CLOSED:
            self.state = replace(self.state, mode=CLOSED, concurrency=max(1, int(level.value)))
        else:
            self.state = replace(self.state, mode=RATE, rate=max(MIN_RATE, float(level.value)))
        return DialChange(level=self.state.level, origin=origin)

    # ---- the sweep ------------------------------------------------------------------------
    def _start(self) -> DialChange:
        self._sweep = _Sweep(sweep_levels(1, self.max_level), self.step_s)
        first = self._sweep.levels[0]
        self.state = replace(self.state, mode=CLOSED, concurrency=first, paused=False)
        return DialChange(
            level=self.state.level, paused=False, origin="sweep", note="sweep started"
        )

    def _stop_sweep(self, why: str, hold: int | None = None, verdict: bool = True) -> DialChange:
        self._sweep = None
        if hold is None:
            return DialChange(note=f"sweep stopped: {why}", verdict=verdict)
        self.state = replace(self.state, mode=CLOSED, concurrency=hold)
        return DialChange(
            level=self.state.level,
            origin="hold",
            note=f"sweep stopped: {why}; holding c={hold}",
            verdict=verdict,
        )

    def tick(self, step: SweepStep, knee: Knee | None, slo_limit: int | None) -> DialChange | None:
        """The sweep's next move once the current step has lasted long enough (``_Sweep.done``).

        ``step``: the current step as it stands; ``knee``/``slo_limit``: the verdict over the
        steps so far.
        """
        sw = self._sweep
        if sw is None or self.state.paused:
            return None
        level = sw.levels[sw.position]
        early = not step.settling and step.measured >= sw.step_s
        if knee is not None and knee.confirmed and level > knee.concurrency and early:
            return self._stop_sweep(  # the verdict is in: this level's figures confirmed it
                f"knee at c={knee.concurrency} ({knee.reason})", knee.concurrency
            )
        if not sw.done(step):
            return None
        attainment = step.attainment
        if not math.isnan(attainment) and attainment < SLO_ATTAINMENT and not step.settling:
            return self._stop_sweep(f"SLO breached at c={level}", slo_limit)
        if knee is not None and knee.confirmed and level > knee.concurrency:
            return self._stop_sweep(
                f"knee at c={knee.concurrency} ({knee.reason})", knee.concurrency
            )
        if sw.position + 1 >= len(sw.levels):
            return self._stop_sweep(f"reached c={level}, the sweep's last level")
        sw.position += 1
        if not step.settling:
            sw.prev_e2el_p90_s = step.e2el_p90_s
        self.state = replace(self.state, concurrency=sw.levels[sw.position])
        return DialChange(level=self.state.level, origin="sweep")

    def progress(self, step: SweepStep) -> SweepProgress | None:
        sw = self._sweep
        if sw is None:
            return None
        left = max(0.0, sw.min_s - (step.held_s if step.settling else step.measured))
        return SweepProgress(sw.position + 1, len(sw.levels), sw.levels[sw.position], left)
