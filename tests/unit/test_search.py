"""The load search policy against synthetic servers: monotone, noisy, flat and peaked curves."""

from __future__ import annotations

import math
import random

import pytest

from infmon.model.search.level_fit import (
    Probe,
    fit_levels,
    isotonic_decreasing,
    pass_confidence,
)
from infmon.model.search.policy import Next, SearchSpec, Verdict, next_move
from infmon.model.steps.knee import KneePoint


class Curve:
    """A server whose share of requests within the SLO falls as load rises past ``frontier``
    (the level where exactly 90 % meet it), with binomial noise per step."""

    def __init__(self, frontier: float, spread: float = 0.06, n: int = 80, seed: int = 0) -> None:
        self.frontier, self.spread, self.n = frontier, spread, n
        self.rng = random.Random(seed)

    def attainment(self, c: float) -> float:
        # logistic in log-load, 0.9 at the frontier
        x = math.log(c / self.frontier) / self.spread
        return 1.0 / (1.0 + math.exp(x - math.log(9.0)))

    def probe(self, c: float, step: int) -> Probe:
        a = self.attainment(c)
        good = sum(self.rng.random() < a for _ in range(self.n))
        tok_s = 50 * c / (1 + c / 200)
        goodput = good / self.n * c / 2.0
        margin = (c / self.frontier) ** 1.5
        return Probe(c, step, self.n, good, tok_s, tok_s / c, goodput, margin=margin)


def run(spec: SearchSpec, curve: Curve, limit: int = 60) -> tuple[Verdict, list[Probe]]:
    probes: list[Probe] = []
    for _ in range(limit):
        move = next_move(spec, probes)
        if isinstance(move, Verdict):
            return move, probes
        assert spec.lo <= move.level <= spec.hi
        probes.append(curve.probe(move.level, len(probes)))
    raise AssertionError("the search never ended")


def grid_frontier(curve: Curve, levels: list[int]) -> tuple[float, int]:
    """The dense grid's answer: the highest grid level whose fitted attainment passes."""
    probes = [curve.probe(c, i) for i, c in enumerate(levels)]
    fits = fit_levels(probes)
    return max(f.level for f in fits if f.fitted >= 0.9), len(probes)


@pytest.mark.parametrize("frontier", [7.5, 37.3, 100.0, 230.0])
def test_slo_search_finds_the_frontier_within_5pct_in_half_the_grid(frontier):
    spec = SearchSpec("slo", lo=1, hi=512, resolution=0.05, budget=16)
    curve = Curve(frontier, seed=int(frontier))
    verdict, probes = run(spec, curve)
    assert verdict.status == "found"
    assert verdict.found is not None and verdict.bound is not None
    found = verdict.found.level
    assert abs(found - frontier) <= max(1.0, 0.05 * frontier), (found, frontier, probes)
    assert verdict.found.level < verdict.bound.level
    assert verdict.found.level <= verdict.estimate <= verdict.bound.level
    grid = list(
        range(max(1, int(frontier * 0.05)), int(frontier * 1.5) + 1, max(1, int(frontier * 0.05)))
    )
    g, n_grid = grid_frontier(Curve(frontier, seed=99), grid)
    assert len(probes) <= n_grid / 2, (len(probes), n_grid)
    assert abs(found - g) <= max(1.0, 0.05 * g)


def test_noisy_curves_mostly_land_within_the_resolution():
    hits = 0
    for seed in range(40):
        curve = Curve(60.0, spread=0.08, n=40, seed=seed)
        verdict, _ = run(SearchSpec("slo", lo=1, hi=256, budget=16), curve)
        assert verdict.found is not None
        hits += abs(verdict.found.level - 60.0) <= 0.08 * 60.0
    assert hits >= 34, hits


def test_boundary_is_re_measured_when_unsure():
    # a curve so flat at the boundary that one step cannot tell: the policy measures again
    curve = Curve(40.0, spread=0.6, n=20, seed=3)
    spec = SearchSpec("slo", lo=1, hi=256, budget=20)
    verdict, probes = run(spec, curve)
    levels = [p.level for p in probes]
    assert any(levels.count(lv) > 1 for lv in set(levels)), levels
    assert all(levels.count(lv) <= spec.max_repeats for lv in set(levels))
    assert verdict.confidence == verdict.confidence  # a number, not nan


def test_budget_stops_the_search_and_says_so():
    spec = SearchSpec("slo", lo=1, hi=4096, budget=5)
    verdict, probes = run(spec, Curve(1000.0))
    assert verdict.status == "budget" and len(probes) == 5
    assert "budget of 5" in verdict.reason


def test_below_and_above_the_range():
    v, probes = run(SearchSpec("slo", lo=64, hi=256), Curve(10.0))
    assert v.status == "below_range" and v.found is None and v.bound is not None
    assert v.bound.level == 64
    v, probes = run(SearchSpec("slo", lo=1, hi=32), Curve(1000.0))
    assert v.status == "above_range" and v.found is not None and v.found.level == 32
    assert [p.level for p in probes] == [1, 2, 4, 8, 16, 32]


def test_rate_levels_are_not_rounded():
    spec = SearchSpec("slo", lo=0.5, hi=64.0, integer=False, resolution=0.05)
    verdict, probes = run(spec, Curve(13.7, seed=5))
    assert verdict.found is not None
    assert abs(verdict.found.level - 13.7) <= 0.08 * 13.7
    assert any(p.level != round(p.level) for p in probes)


def test_isotonic_fit_pools_violators_with_weights():
    assert isotonic_decreasing([1.0, 0.8, 0.9, 0.2], [10, 10, 10, 10]) == pytest.approx(
        [1.0, 0.85, 0.85, 0.2]
    )
    assert isotonic_decreasing([0.5, 1.0], [30, 10]) == pytest.approx([0.625, 0.625])
    fit = isotonic_decreasing([1.0, math.nan, 0.5], [10, 0, 10])
    assert fit[0] == 1.0 and fit[2] == 0.5


def test_pass_confidence_grows_with_requests_and_distance():
    assert pass_confidence(19, 20, 0.9) < pass_confidence(190, 200, 0.9)
    assert pass_confidence(100, 100, 0.9) > 0.99
    assert pass_confidence(50, 100, 0.9) < 0.01
    assert math.isnan(pass_confidence(0, 0, 0.9))


def test_goodput_search_finds_the_peak():
    class Peaked(Curve):
        def probe(self, c: float, step: int) -> Probe:
            goodput = c * math.exp(-c / 48.0)  # peak at 48
            return Probe(c, step, 100, 100, c * 10, 10.0, goodput)

    verdict, probes = run(SearchSpec("goodput", lo=1, hi=512, budget=16), Peaked(0))
    assert verdict.status == "found" and verdict.found is not None
    assert abs(verdict.found.level - 48) <= 3
    assert len(probes) <= 14


def test_knee_search_brackets_the_present_rule():
    def point(c: float) -> KneePoint:
        tok = 100 * min(c, 32) * (1 + 0.001 * c)
        return KneePoint(c, tok, 100 + 5 * c, 1.0)

    spec = SearchSpec("knee", lo=1, hi=512)
    probes: list[Probe] = []
    knee: list[KneePoint] = []
    while isinstance(move := next_move(spec, probes, knee), Next):
        probes.append(Probe(move.level, len(probes), 50, 50, 1.0, 1.0, 1.0))
        knee.append(point(move.level))
    assert move.status == "found" and move.found is not None and move.bound is not None
    assert move.found.level == 32 and move.bound.level == 64
    assert "knee at c=32" in move.reason


def test_a_step_without_requests_stops_the_search_and_says_why():
    curve = Curve(1000.0)
    spec = SearchSpec("slo", lo=4, hi=256)
    probes = [curve.probe(4, 0), curve.probe(8, 1), Probe(16, 2, 0, 0, math.nan, math.nan, 0.0)]
    v = next_move(spec, probes)
    assert isinstance(v, Verdict) and v.status == "unmeasured"
    assert v.found is not None and v.found.level == 8 and v.bound is None
    assert "c=16 measured no request" in v.reason and "--step-duration" in v.reason
