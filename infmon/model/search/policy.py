"""A load search: the level to measure next, or the verdict, from the probes measured so far.

Three goals, each a pure policy (the same probes give the same move, so a journal replays it):

- ``slo``: the highest level whose steps meet every SLO bound at the required attainment.
  *Bracketing*: from the range's low end the level grows by ``growth`` until a level fails
  (or the range's top passes). *Bisection on a monotone fit*: the probes are pooled per level
  and attainment is fitted non-increasing in load (``search_fit``); the next level is aimed at
  where the latency margin crosses the bound, kept within the middle half of the bracket so
  the bracket always shrinks. *Re-measuring near the boundary*: once the bracket is within
  the resolution, a boundary level whose side of the bound is less sure than ``confidence``
  is measured again (pooled), up to ``max_repeats`` times. The budget caps the probes.
- ``goodput``: the level of maximum goodput (requests/s meeting the SLO): bracketed by
  growth until goodput falls, then the wider side of the best level is halved.
- ``knee``: the knee rule of ``model/steps/knee.py`` on levels grown by ``growth`` until it
  confirms a knee; the verdict is the knee bracketed by the next level measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from infmon.model.search.level_fit import LevelFit, Probe, crossing, fit_levels, pass_confidence
from infmon.model.steps.knee import SLO_ATTAINMENT, KneePoint, knee_of_points

Goal = Literal["slo", "goodput", "knee"]
GOALS: tuple[Goal, ...] = ("slo", "goodput", "knee")
Status = Literal["found", "below_range", "above_range", "budget", "unmeasured"]
NAN = math.nan


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """What to find, over which levels, and when to stop."""

    goal: Goal = "slo"
    lo: float = 1.0
    hi: float = 512.0
    integer: bool = True
    """Concurrency (whole streams); False for request rates."""
    resolution: float = 0.05
    """Stop when the bracket is at most this fraction of its lower level (or one stream)."""
    budget: int = 12
    """At most this many probes."""
    attainment: float = SLO_ATTAINMENT
    confidence: float = 0.9
    growth: float = 2.0
    max_repeats: int = 3

    def width_ok(self, lo: float, hi: float) -> bool:
        return hi - lo <= max(1.0 if self.integer else 0.0, self.resolution * lo) + 1e-9


@dataclass(frozen=True, slots=True)
class Next:
    """Measure this level next, and why (shown and journalled)."""

    level: float
    why: str


@dataclass(frozen=True, slots=True)
class Verdict:
    """The search's answer; ``found`` is None when no level in the range qualifies."""

    goal: Goal
    status: Status
    found: LevelFit | None
    """The last passing level (slo), the level of peak goodput, the knee."""
    bound: LevelFit | None
    """The first failing level (slo), the next level measured past the answer otherwise."""
    estimate: float
    """Where the SLO is crossed, between ``found`` and ``bound`` (slo only; nan otherwise)."""
    confidence: float
    """How sure both sides of the SLO bracket are (the lesser; nan when not an SLO bracket)."""
    reason: str
    levels: tuple[LevelFit, ...]
    probes: int


Move = Next | Verdict


def next_move(spec: SearchSpec, probes: Sequence[Probe], knee: Sequence[KneePoint] = ()) -> Move:
    """The next level to measure or the verdict (see the module docstring)."""
    if not probes:
        return Next(spec.lo, "the range's low end")
    if (empty := next((p for p in probes if p.requests == 0), None)) is not None:
        return _unmeasured(spec, [p for p in probes if p.requests > 0], empty.level, len(probes))
    fits = fit_levels(probes)
    if spec.goal == "slo":
        move = _slo(spec, fits, len(probes))
    elif spec.goal == "goodput":
        move = _goodput(spec, fits, len(probes))
    else:
        move = _knee(spec, fits, len(probes), knee)
    if isinstance(move, Next) and len(probes) >= spec.budget:
        return _budget(spec, fits, len(probes))
    return move


def _unmeasured(spec: SearchSpec, probes: Sequence[Probe], level: float, n: int) -> Verdict:
    """A step that measured no request (every stream still held a warm-up request): its level
    cannot be judged, and probing it again would not either; the search stops and says why."""
    fits = fit_levels(probes)
    best = next((f for f in reversed(fits) if f.fitted >= spec.attainment), None)
    reason = (
        f"{_lbl(spec, level)} measured no request: its requests outlast the step "
        "(lengthen --step-duration)"
    )
    return Verdict(spec.goal, "unmeasured", best, None, NAN, NAN, reason, tuple(fits), n)


def _grow(spec: SearchSpec, level: float) -> float:
    nxt = min(spec.hi, level * spec.growth)
    return float(max(level + 1, round(nxt))) if spec.integer else nxt


OVERSHOOT = 1.15
"""Bracketing aims this far past where the margin's trend meets the bound."""


def _reach(spec: SearchSpec, passing: list[LevelFit]) -> float:
    """The next bracketing level: ×``growth``, or less when the latency margin of the two
    highest passing levels, extended (log-log), meets the bound sooner (never under ×1.25)."""
    lp = passing[-1]
    nxt = lp.level * spec.growth
    pts = [f for f in passing if f.margin > 0][-2:]
    if len(pts) == 2 and pts[1].margin > pts[0].margin and pts[1].margin < 1:
        a, b = pts
        slope = math.log(b.margin / a.margin) / math.log(b.level / a.level)
        aim = b.level * math.exp(-math.log(b.margin) / slope) * OVERSHOOT
        nxt = min(nxt, max(lp.level * 1.25, aim))
    nxt = min(spec.hi, nxt)
    return float(max(lp.level + 1, round(nxt))) if spec.integer else nxt


def _slo(spec: SearchSpec, fits: list[LevelFit], n: int) -> Move:
    t = spec.attainment
    passing = [f for f in fits if f.fitted >= t]
    lp = passing[-1] if passing else None
    ff = next((f for f in fits if f.fitted < t and (lp is None or f.level > lp.level)), None)
    if ff is None:
        assert lp is not None
        if lp.level >= spec.hi:
            return _slo_verdict(spec, fits, n, "above_range", lp, None)
        return Next(_reach(spec, passing), f"bracketing: {_lbl(spec, lp.level)} meets the SLO")
    if lp is None:
        if (again := _remeasure(spec, ff, passes=False)) is not None:
            return again
        return _slo_verdict(spec, fits, n, "below_range", None, ff)
    if not spec.width_ok(lp.level, ff.level):
        return Next(_aim(spec, lp, ff), f"bisecting {_lbl(spec, lp.level)}–{ff.level:g}")
    for f, passes in ((lp, True), (ff, False)):
        if (again := _remeasure(spec, f, passes)) is not None:
            return again
    return _slo_verdict(spec, fits, n, "found", lp, ff)


def _aim(spec: SearchSpec, lp: LevelFit, ff: LevelFit) -> float:
    """Aim at the crossing, kept within the middle half of the bracket."""
    w = ff.level - lp.level
    x = min(lp.level + 0.75 * w, max(lp.level + 0.25 * w, crossing(lp, ff, spec.attainment)))
    if not spec.integer:
        return x
    return float(min(ff.level - 1, max(lp.level + 1, round(x))))


def _side_confidence(spec: SearchSpec, f: LevelFit, passes: bool) -> float:
    c = pass_confidence(f.good, f.requests, spec.attainment)
    return c if passes else 1.0 - c


def _remeasure(spec: SearchSpec, f: LevelFit, passes: bool) -> Next | None:
    conf = _side_confidence(spec, f, passes)
    if conf >= spec.confidence or len(f.probes) >= spec.max_repeats:
        return None
    side = "meets" if passes else "misses"
    return Next(
        f.level, f"re-measuring {_lbl(spec, f.level)}: {side} the SLO at {conf:.0%} confidence"
    )


def _slo_verdict(
    spec: SearchSpec,
    fits: list[LevelFit],
    n: int,
    status: Status,
    lp: LevelFit | None,
    ff: LevelFit | None,
    reason: str = "",
) -> Verdict:
    confs = [_side_confidence(spec, f, ok) for f, ok in ((lp, True), (ff, False)) if f is not None]
    conf = min(confs) if confs else NAN
    est = crossing(lp, ff, spec.attainment) if lp is not None and ff is not None else NAN
    att = f"{spec.attainment:.0%} of requests within the SLO"
    if status == "below_range":
        reason = f"no level meets the SLO: {_lbl(spec, spec.lo)} already misses it ({att})"
    elif status == "above_range":
        reason = f"every level up to {_lbl(spec, spec.hi)} meets the SLO ({att})"
    elif not reason:
        assert lp is not None and ff is not None
        reason = (
            f"highest level meeting the SLO: {_lbl(spec, lp.level)} "
            f"({lp.attainment:.0%} within it); {_lbl(spec, ff.level)} misses it "
            f"({ff.attainment:.0%}); {att}"
        )
    return Verdict("slo", status, lp, ff, est, conf, reason, tuple(fits), n)


def _goodput(spec: SearchSpec, fits: list[LevelFit], n: int) -> Move:
    vals = [f.goodput_req_s if not math.isnan(f.goodput_req_s) else -1.0 for f in fits]
    i = max(range(len(fits)), key=lambda k: vals[k])
    best = fits[i]
    if i == len(fits) - 1:
        if best.level >= spec.hi:
            reason = f"goodput still rising at the range's top {_lbl(spec, spec.hi)}"
            return Verdict("goodput", "above_range", best, None, NAN, NAN, reason, tuple(fits), n)
        return Next(_grow(spec, best.level), "bracketing: goodput still rising")
    left = fits[i - 1] if i > 0 else None
    right = fits[i + 1]
    vertex = _vertex(left, best, right)
    sides = [right, left] if vertex >= best.level else [left, right]
    for other in (f for f in sides if f is not None):
        lo, hi = sorted((best.level, other.level))
        if not spec.width_ok(lo, hi):
            x = min(lo + 0.75 * (hi - lo), max(lo + 0.25 * (hi - lo), vertex))
            x = float(min(hi - 1, max(lo + 1, round(x)))) if spec.integer else x
            return Next(x, "narrowing the peak")
    reason = f"peak goodput {best.goodput_req_s:.2f} req/s at {_lbl(spec, best.level)}"
    return Verdict("goodput", "found", best, right, NAN, NAN, reason, tuple(fits), n)


def _vertex(left: LevelFit | None, best: LevelFit, right: LevelFit) -> float:
    """The peak of a parabola through the three goodputs in log level (the best level's
    geometric midpoint with a neighbour when there is no left one or no curvature)."""
    if left is None or left.level <= 0:
        return math.sqrt(best.level * right.level)
    xs = [math.log(f.level) for f in (left, best, right)]
    ys = [f.goodput_req_s for f in (left, best, right)]
    d1, d2 = (ys[1] - ys[0]) / (xs[1] - xs[0]), (ys[2] - ys[1]) / (xs[2] - xs[1])
    curv = (d2 - d1) / (xs[2] - xs[0])
    if not curv < 0:
        return math.sqrt(best.level * right.level)
    x = (xs[0] + xs[1]) / 2 - d1 / (2 * curv)
    return math.exp(min(xs[2], max(xs[0], x)))


def _knee(spec: SearchSpec, fits: list[LevelFit], n: int, knee: Sequence[KneePoint]) -> Move:
    found = knee_of_points(sorted(knee, key=lambda p: p.concurrency))
    top = fits[-1]
    if found is not None and found.confirmed:
        at = next((f for f in fits if f.level == found.concurrency), None)
        above = next((f for f in fits if f.level > found.concurrency), None)
        reason = f"knee at {_lbl(spec, found.concurrency)}: {found.reason}"
        return Verdict("knee", "found", at, above, NAN, NAN, reason, tuple(fits), n)
    if top.level >= spec.hi:
        tail = f" (≈ {found.label})" if found is not None else ""
        reason = f"no confirmed knee up to {_lbl(spec, spec.hi)}{tail}"
        return Verdict("knee", "above_range", None, None, NAN, NAN, reason, tuple(fits), n)
    return Next(_grow(spec, top.level), "bracketing the knee")


def _budget(spec: SearchSpec, fits: list[LevelFit], n: int) -> Verdict:
    t = spec.attainment
    if spec.goal == "slo":
        lp = next((f for f in reversed(fits) if f.fitted >= t), None)
        ff = next((f for f in fits if f.fitted < t and (lp is None or f.level > lp.level)), None)
        reason = f"budget of {spec.budget} probes spent; bracket so far: " + (
            f"{_lbl(spec, lp.level) if lp else 'none'} – {ff.level:g}" if ff else "not closed"
        )
        return _slo_verdict(spec, fits, n, "budget", lp, ff, reason)
    best = None
    if spec.goal == "goodput":
        best = max(fits, key=lambda f: f.goodput_req_s if not math.isnan(f.goodput_req_s) else -1)
    reason = f"budget of {spec.budget} probes spent before the {spec.goal} was bracketed"
    return Verdict(spec.goal, "budget", best, None, NAN, NAN, reason, tuple(fits), n)


def _lbl(spec: SearchSpec, level: float) -> str:
    return f"c={level:g}" if spec.integer else f"{level:g} req/s"
