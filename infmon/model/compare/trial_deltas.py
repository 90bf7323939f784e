"""A figure against the baseline's over repeated trials: when both runs held a level several
times (``bench --repeat``), the delta is the ratio of the two runs' trial means and its 95 %
interval comes from the spread between trials (``trial_stats.ratio_ci``, Welch's on the log
scale: two runs made one after the other are not paired), not from the bootstrap inside one
step. The run-to-run noise floor is what decides "beyond noise" then.

The interval is Welch's half-width on the log scale placed around the ratio of the arithmetic
means shown (the means the trials table prints), so it always contains the delta beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infmon.model.compare.noise import Delta
from infmon.model.compare.trial_stats import ratio_ci

MIN_TRIALS = 2
"""Fewer trials on either side: no trial-level interval (the within-run bootstrap stays)."""
METHOD = (
    "over repeated trials (bench --repeat): the ratio of the two runs' trial means, its 95% "
    "interval from the spread between trials (Welch's t on the log scale, unpaired), centred "
    "on the ratio shown; 'beyond noise' when the interval excludes 0"
)


def _finite(xs: Sequence[float]) -> list[float]:
    return [float(x) for x in xs if math.isfinite(x)]


def trial_delta(base: Sequence[float], cur: Sequence[float]) -> Delta | None:
    """``cur``'s trials against ``base``'s (one value per trial), or None when either side has
    fewer than ``MIN_TRIALS`` positive values (a figure a run could not give, a zero rate)."""
    a, b = _finite(base), _finite(cur)
    if min(len(a), len(b)) < MIN_TRIALS or min(a + b) <= 0:
        return None
    r = ratio_ci(a, b, paired=False)
    if not (math.isfinite(r.low) and math.isfinite(r.high) and r.ratio > 0):
        return None
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    shown = mean_b / mean_a
    return Delta(mean_a, mean_b, ci=(shown * r.low / r.ratio - 1, shown * r.high / r.ratio - 1))
