"""Repeated-trial statistics against references: t quantiles, interval coverage, paired and
Welch ratios, the minimum detectable effect."""

from __future__ import annotations

import math
import random

import pytest

from infmon.model.compare.trial_stats import (
    min_detectable_effect,
    ratio_ci,
    summarize,
    t975,
    tight,
    trials_needed,
)


@pytest.mark.parametrize(
    ("df", "t"),
    [(1, 12.7062), (4, 2.7764), (30, 2.0423), (40, 2.0211), (60, 2.0003), (120, 1.9799)],
)
def test_t_quantiles_match_the_tables(df, t):
    assert t975(df) == pytest.approx(t, abs=6e-4)


def test_summary_of_known_values():
    s = summarize([10.0, 12.0, 11.0, 9.0, 13.0])
    assert s.n == 5 and s.mean == 11.0
    assert s.sd == pytest.approx(math.sqrt(2.5))
    h = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert (s.ci_low, s.ci_high) == pytest.approx((11 - h, 11 + h), abs=1e-3)
    assert s.cv == pytest.approx(math.sqrt(2.5) / 11)
    one = summarize([5.0, math.nan])
    assert one.n == 1 and math.isnan(one.ci_low) and math.isnan(one.cv)
    assert summarize([]).n == 0


def test_95pct_interval_covers_the_true_mean_about_95pct_of_the_time():
    rng = random.Random(1)
    cover = sum(summarize([rng.gauss(100, 5) for _ in range(5)]).covers(100.0) for _ in range(4000))
    assert 0.935 < cover / 4000 < 0.965


def test_tight_needs_three_trials_and_a_narrow_interval():
    assert not tight(summarize([100.0, 100.1]), 0.03)
    assert tight(summarize([100.0, 100.5, 99.5]), 0.03)
    assert not tight(summarize([100.0, 110.0, 90.0]), 0.03)


def test_paired_ratio_of_interleaved_trials():
    a = [100.0, 104.0, 98.0, 101.0]
    b = [131.0, 136.0, 128.5, 132.0]
    r = ratio_ci(a, b)
    assert r.paired and r.n == 4
    assert r.low < r.ratio < r.high and r.ratio == pytest.approx(1.31, abs=0.01)
    assert r.beyond_noise and "1.31×" in r.text()
    same = ratio_ci(a, [101.0, 103.0, 99.0, 100.0])
    assert not same.beyond_noise


def test_welch_ratio_with_unequal_counts_and_degenerate_cases():
    r = ratio_ci([100.0, 102.0, 98.0], [150.0, 149.0, 152.0, 151.0, 148.0])
    assert not r.paired and r.low < 1.5 < r.high
    assert math.isnan(ratio_ci([], [1.0]).ratio)
    assert math.isnan(ratio_ci([100.0], [120.0, 121.0]).low)


def test_minimum_detectable_effect_and_trials_needed():
    # cv 3 %, 5 trials a side: (t_8 + z_0.8) × 0.03 × √(2/5) = (2.306 + 0.8416) × 0.03 × 0.632
    assert min_detectable_effect(0.03, 5) == pytest.approx(0.0597, abs=5e-4)
    n = trials_needed(0.03, 0.05)
    assert n is not None and min_detectable_effect(0.03, n) <= 0.05
    assert min_detectable_effect(0.03, n - 1) > 0.05
    assert trials_needed(math.nan, 0.05) is None
    assert trials_needed(0.5, 0.001, most=50) is None
