"""``compare`` over repeated trials: the delta of two runs' trial means and its interval."""

from __future__ import annotations

import math

import pytest

from infmon.model.compare.trial_deltas import trial_delta
from infmon.model.compare.trial_stats import ratio_ci


def test_the_delta_is_the_ratio_of_trial_means_with_welchs_interval_around_it():
    base = [541.0, 612.0, 498.0]  # output tok/s of three rounds at c=16 (CV ~10 %)
    cur = [190.0, 204.0, 176.0]
    d = trial_delta(base, cur)
    assert d is not None
    assert d.base == pytest.approx(sum(base) / 3) and d.value == pytest.approx(sum(cur) / 3)
    assert d.ci is not None and d.ci[0] <= d.rel <= d.ci[1] and d.beyond_noise
    r = ratio_ci(base, cur, paired=False)
    assert not r.paired  # two runs one after the other: never paired by round
    assert d.ci[1] - d.ci[0] == pytest.approx((r.high - r.low) * (d.rel + 1) / r.ratio)


def test_a_difference_inside_the_run_to_run_noise_is_within_noise():
    d = trial_delta([541.0, 612.0, 498.0], [560.0, 520.0, 590.0])
    assert d is not None and d.ci is not None and d.beyond_noise is False


def test_too_few_trials_or_a_zero_figure_leaves_the_bootstrap():
    assert trial_delta([541.0], [190.0, 204.0]) is None
    assert trial_delta([541.0, math.nan], [190.0, 204.0]) is None
    assert trial_delta([0.0, 0.2, 0.1], [0.3, 0.2, 0.4]) is None  # goodput 0 in one round


def test_paired_ratio_is_the_default_for_interleaved_trials():
    a, b = [100.0, 120.0, 90.0], [130.0, 157.0, 116.0]
    assert ratio_ci(a, b).paired and not ratio_ci(a, b, paired=False).paired
    assert ratio_ci(a, b).high - ratio_ci(a, b).low < (
        ratio_ci(a, b, paired=False).high - ratio_ci(a, b, paired=False).low
    )


def test_the_note_says_which_levels_are_over_trials_and_why_others_are_not():
    from infmon.model.steps.span import CLOSED, Level
    from infmon.report.compare_trials import TrialLevel, trials_text

    seen = (
        TrialLevel(Level(CLOSED, 4), 3, 3, frozenset({"tok_s"})),
        TrialLevel(Level(CLOSED, 16), 1, 3, frozenset(), (2, 0)),
        TrialLevel(Level(CLOSED, 64), 3, 2, frozenset({"tok_s"}), (0, 1)),
    )
    assert trials_text(seen, "fp8") == (
        "c=4 over 3 trials each; c=64 over 3 (baseline) and 2 trials; "
        "c=16 not over trials: the client was late in 2 of the baseline's 3 trials; "
        "c=64 left out: the client was late in 1 of fp8's 3 trials"
    )
