"""Speculative decoding's economics: tokens per step, the break-even acceptance, the verdict."""

from __future__ import annotations

import math

import pytest

from infmon.model.compare.spec_econ import (
    alpha_for_tokens,
    economics,
    tokens_per_step,
)
from infmon.sim.spec import marginal_acceptance


def test_tokens_per_step_is_the_geometric_sum():
    assert tokens_per_step(0.0, 4) == 1.0
    assert tokens_per_step(1.0, 4) == 5.0
    assert tokens_per_step(0.5, 3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert math.isnan(tokens_per_step(1.2, 3)) and math.isnan(tokens_per_step(0.5, 0))


def test_the_formula_matches_the_simulators_spec_model_at_constant_acceptance():
    """The simulator draws acceptance per request; with no spread (a huge concentration) its
    tokens per step are the model's (1 − α^(k+1)) / (1 − α)."""
    for alpha, k in ((0.12, 3), (0.7, 4), (0.9, 2)):
        sim = 1 + sum(marginal_acceptance((alpha,) * k, k, concentration=1000))
        assert sim == pytest.approx(tokens_per_step(alpha, k), rel=2e-3)


@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.3, 0.71, 0.99])
def test_alpha_for_tokens_inverts_tokens_per_step(alpha):
    assert alpha_for_tokens(tokens_per_step(alpha, 3), 3) == pytest.approx(alpha, abs=1e-9)
    assert math.isnan(alpha_for_tokens(4.5, 3)) and math.isnan(alpha_for_tokens(0.5, 3))


def test_break_even_from_measured_step_costs():
    """A k=3 drafter whose step costs 2.57 baseline steps pays at α ≈ 0.71; at α = 0.12 it is
    2.3× slower: the issue's example line."""
    k, base_tpot = 3, 0.020
    length = tokens_per_step(0.12, k)
    step = tokens_per_step(0.71, k) * base_tpot  # chosen so that the break-even is 0.71
    e = economics("c=16", k, length, step / length, base_tpot)
    assert e is not None
    assert e.breakeven_alpha == pytest.approx(0.71, abs=1e-6)
    assert e.alpha == pytest.approx(0.12, abs=1e-6)
    assert e.speedup == pytest.approx(base_tpot / (step / length))
    assert not e.pays
    assert e.verdict() == (
        f"c=16: spec is {1 / e.speedup:.1f}× slower than baseline; it would need acceptance "
        "α ≥ 0.71 per position, it has α 0.12"
    )
    assert e.draft_pass_s == pytest.approx((step - base_tpot) / k)
    assert "ms per draft pass (k=3)" in e.cost_line()


def test_a_drafter_costing_more_than_k_plus_1_tokens_can_never_pay():
    e = economics("c=1", 3, 1.1, 0.070, 0.017)  # a step costs 4.5 baseline steps
    assert e is not None and math.isnan(e.breakeven_alpha)
    assert "no acceptance α pays: a step costs 4.5 baseline steps" in e.verdict()
    assert "at most k+1 = 4 tokens" in e.verdict()


def test_a_good_drafter_pays_and_says_down_to_where():
    e = economics("c=1", 4, tokens_per_step(0.8, 4), 0.006, 0.017)
    assert e is not None and e.pays and e.speedup == pytest.approx(0.017 / 0.006)
    assert e.verdict().startswith(
        "c=1: spec is 2.8× faster than baseline; it pays while acceptance α ≥ "
    )
    assert 0 < e.breakeven_alpha < 0.8


def test_missing_figures_give_no_economics():
    assert economics("c=1", 3, 1.1, math.nan, 0.017) is None
    assert economics("c=1", 0, 1.1, 0.05, 0.017) is None
