"""Repeated trials: a figure measured N times (a level held N times, a run repeated), summarised
by its mean, a 95 % confidence interval (Student's t) and its coefficient of variation; when a
run has measured enough (``tight``); a ratio of two sides with its interval (paired when the
trials were interleaved A-B-A-B); and how many trials a given difference needs.

This is the run-to-run noise floor: a step's own bootstrap (``model/compare/noise.py``) sees only
the noise inside one measurement, not how much the next measurement of the same level moves.

Pure: numbers in, numbers out; no numpy needed for a handful of trials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

NAN = math.nan

_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip
"""Student's t 97.5 % quantiles for 1…30 degrees of freedom."""
Z975 = 1.959963984540054
Z80 = 0.8416212335729143


def t975(df: float) -> float:
    """Student's t 97.5 % quantile (two-sided 95 %): the table, then the Cornish–Fisher
    expansion (within 0.0005 past 30 degrees of freedom)."""
    if not df >= 1:
        return NAN
    if df <= 30 and df == int(df):
        return _T975[int(df) - 1]
    z = Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    return z + g1 / df + g2 / df**2 + g3 / df**3


@dataclass(frozen=True, slots=True)
class TrialStats:
    """One figure over its trials."""

    n: int
    mean: float
    sd: float
    ci_low: float
    ci_high: float

    @property
    def cv(self) -> float:
        """Standard deviation over the mean (run-to-run noise as a fraction)."""
        return self.sd / abs(self.mean) if self.n >= 2 and self.mean else NAN

    @property
    def half_width(self) -> float:
        """The interval's half-width as a fraction of the mean."""
        if self.n < 2 or not self.mean:
            return NAN
        return (self.ci_high - self.ci_low) / 2 / abs(self.mean)

    def covers(self, x: float) -> bool:
        return self.ci_low <= x <= self.ci_high


def summarize(values: Sequence[float]) -> TrialStats:
    """Mean, sample SD and the 95 % t interval of the mean (nan values left out)."""
    xs = [float(v) for v in values if not math.isnan(v)]
    n = len(xs)
    if n == 0:
        return TrialStats(0, NAN, NAN, NAN, NAN)
    mean = sum(xs) / n
    if n == 1:
        return TrialStats(1, mean, NAN, NAN, NAN)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    return TrialStats(n, mean, sd, mean - h, mean + h)


MIN_TRIALS = 3
"""``tight`` never stops before this many trials (two values say little about their spread)."""


def tight(stats: TrialStats, target: float) -> bool:
    """The interval's half-width is within ``target`` of the mean (e.g. 0.03 for ±3 %)."""
    return stats.n >= MIN_TRIALS and stats.half_width <= target


@dataclass(frozen=True, slots=True)
class Ratio:
    """``b / a`` of two sides' means with its 95 % interval."""

    ratio: float
    low: float
    high: float
    paired: bool
    n: int

    @property
    def beyond_noise(self) -> bool:
        return not self.low <= 1.0 <= self.high

    def text(self) -> str:
        if math.isnan(self.ratio):
            return "n/a"
        if math.isnan(self.low):
            return f"{self.ratio:.2f}×"
        return f"{self.ratio:.2f}× ({self.low:.2f}–{self.high:.2f})"


def ratio_ci(a: Sequence[float], b: Sequence[float], paired: bool = True) -> Ratio:
    """``mean(b) / mean(a)`` with a 95 % interval on the log scale: paired (each trial of b over
    the a trial it was interleaved with) when both have the same count and ``paired`` (the
    trials were interleaved), else Welch's (two runs made one after the other)."""
    la = [math.log(x) for x in a if x > 0]
    lb = [math.log(x) for x in b if x > 0]
    if not la or not lb:
        return Ratio(NAN, NAN, NAN, False, 0)
    if paired and len(la) == len(lb) == len(a) == len(b) and len(la) >= 2:
        d = summarize([y - x for x, y in zip(la, lb, strict=True)])
        return Ratio(math.exp(d.mean), math.exp(d.ci_low), math.exp(d.ci_high), True, d.n)
    diff, se, df = welch(la, lb)
    n = min(len(la), len(lb))
    if math.isnan(se):
        return Ratio(math.exp(diff), NAN, NAN, False, n)
    h = t975(max(1.0, df)) * se
    return Ratio(math.exp(diff), math.exp(diff - h), math.exp(diff + h), False, n)


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``mean(b) - mean(a)``, its standard error and Welch–Satterthwaite degrees of freedom
    (nan for both when a side has fewer than two values)."""
    sa, sb = summarize(a), summarize(b)
    diff = sb.mean - sa.mean
    if sa.n < 2 or sb.n < 2:
        return diff, NAN, NAN
    va, vb = sa.sd**2 / sa.n, sb.sd**2 / sb.n
    den = (va**2 / (sa.n - 1) + vb**2 / (sb.n - 1)) or 1e-300
    return diff, math.sqrt(va + vb), (va + vb) ** 2 / den


def min_detectable_effect(cv: float, n: int, power_z: float = Z80) -> float:
    """The smallest relative difference two sides of ``n`` trials each, with run-to-run noise
    ``cv``, tell apart at 95 % confidence with 80 % power: (t + z_power) × cv × √(2/n)."""
    if n < 2 or math.isnan(cv):
        return NAN
    return (t975(2 * n - 2) + power_z) * cv * math.sqrt(2 / n)


def trials_needed(cv: float, effect: float, most: int = 1000) -> int | None:
    """Trials per side for ``min_detectable_effect`` to reach ``effect`` (None: over ``most``)."""
    if math.isnan(cv) or effect <= 0:
        return None
    for n in range(2, most + 1):
        if min_detectable_effect(cv, n) <= effect:
            return n
    return None
