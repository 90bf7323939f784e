"""Is a difference beyond noise? One computation for the figure shown, its delta and interval.

Each figure a comparison shows is a *statistic* of a level's measurements (a percentile of its
requests' TTFT, its token rate over the measured time, …). ``relative(base, cur)`` computes
the figure on both sides exactly as the step tables do (``numpy.percentile``, linear; tokens
over measured seconds), its relative difference, and a bootstrap 95 % interval **of that same
statistic**: the requests (or, for throughput, one-second blocks of the measured time) are
resampled, the statistic recomputed on each resample, and the spread of the resampled
differences (2.5–97.5 % around their median) is placed around the measured difference. So
the interval always contains the delta it belongs to, and "beyond noise" (the interval
excludes 0) is decided on the number printed beside it.

- Percentiles of per-request values (TTFT, TPOT, E2EL): requests resampled.
- Pooled percentiles of inter-token gaps (ITL): requests resampled with all their gaps (the
  gaps of one stream are not independent), by weighted quantiles.
- Token throughput: a moving-block bootstrap over the step's one-second bins (tokens, seconds),
  ratio of sums; blocks keep the bins' correlation over a request's lifetime.
- Goodput: good requests by the second they were sent in, block-resampled as throughput.

Exact figures (KV capacity, a config value) have no sampling noise: they differ or they do not.
Pure: numpy only; the random generator is seeded (0), so a comparison is reproducible.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

RESAMPLES = 1000
MIN_SAMPLES = 5
"""Fewer requests (or bins) on either side: no noise test."""
CHUNK_CELLS = 2_000_000
"""At most this many resampled values in memory at once."""
POOLED_BUDGET = 60_000_000
"""Gap-weight operations a pooled-percentile bootstrap may spend; beyond it, fewer resamples
(never under ``MIN_POOLED_RESAMPLES``)."""
MIN_POOLED_RESAMPLES = 200
MAX_BINS = 2000
"""A throughput bootstrap resamples at most this many bins (longer steps: coarser bins)."""
METHOD = (
    f"bootstrap 95% interval of the shown relative difference (run − baseline) / baseline, "
    f"{RESAMPLES} resamples (seed 0) of the same statistic: requests for latency percentiles "
    "(with all their gaps for ITL), one-second blocks of the measured time for tokens/s "
    "and goodput; the resampled spread is centred on the measured difference; "
    "'beyond noise' when the interval excludes 0"
)


class Statistic(Protocol):
    """A figure of one side's measurements that can be recomputed on resamples."""

    @property
    def size(self) -> int:
        """How many independent units are resampled (requests, bins)."""
        ...

    def point(self) -> float:
        """The figure itself, as the step tables compute it."""
        ...

    def boot(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` resampled values of the figure."""
        ...


def _rows(width: int, n: int) -> int:
    return max(1, min(n, CHUNK_CELLS // max(1, width)))


@dataclass(frozen=True, eq=False)
class Percentile:
    """A linear ``numpy.percentile`` of per-request values (nan dropped)."""

    values: np.ndarray
    q: float

    def __post_init__(self) -> None:
        a = np.asarray(self.values, dtype=float)
        object.__setattr__(self, "values", a[np.isfinite(a)])

    @property
    def size(self) -> int:
        return int(self.values.size)

    def point(self) -> float:
        return float(np.percentile(self.values, self.q)) if self.size else math.nan

    def boot(self, rng: np.random.Generator, n: int) -> np.ndarray:
        a, out = self.values, []
        step = _rows(a.size, n)
        for lo in range(0, n, step):
            idx = rng.integers(0, a.size, size=(min(step, n - lo), a.size))
            out.append(np.percentile(a[idx], self.q, axis=1))
        return np.concatenate(out)


@dataclass(frozen=True, eq=False)
class PooledPercentile:
    """A percentile of every gap of every request pooled (vLLM's ITL), requests resampled."""

    gaps: np.ndarray
    per_request: np.ndarray
    """How many of ``gaps`` each request contributed, in order."""
    q: float

    @property
    def size(self) -> int:
        return int(np.count_nonzero(self.per_request))

    def point(self) -> float:
        return float(np.percentile(self.gaps, self.q)) if self.gaps.size else math.nan

    def boot(self, rng: np.random.Generator, n: int) -> np.ndarray:
        counts = np.asarray(self.per_request, dtype=np.int64)
        m = counts.size
        owner = np.repeat(np.arange(m), counts)
        order = np.argsort(self.gaps, kind="stable")
        gaps, owner = self.gaps[order], owner[order]
        out = []
        step = _rows(gaps.size, n)
        for lo in range(0, n, step):
            rows = min(step, n - lo)
            picks = rng.integers(0, m, size=(rows, m)) + (np.arange(rows) * m)[:, None]
            weights = np.bincount(picks.ravel(), minlength=rows * m).reshape(rows, m)
            cum = np.cumsum(weights[:, owner], axis=1)
            target = cum[:, -1:] * (self.q / 100.0)
            idx = np.minimum((cum < target).sum(axis=1), gaps.size - 1)
            out.append(gaps[idx])
        return np.concatenate(out)


@dataclass(frozen=True, eq=False)
class BlockRate:
    """Amount per second over bins of measured time (tokens / seconds), block-resampled."""

    amounts: np.ndarray
    seconds: np.ndarray

    @property
    def size(self) -> int:
        return int(self.seconds.size)

    def point(self) -> float:
        total = float(self.seconds.sum())
        return float(self.amounts.sum()) / total if total > 0 else math.nan

    def boot(self, rng: np.random.Generator, n: int) -> np.ndarray:
        amounts, seconds = self.amounts, self.seconds
        if seconds.size > MAX_BINS:  # a long step: coarser bins, the same sums
            groups = np.arange(seconds.size) * MAX_BINS // seconds.size
            amounts = np.bincount(groups, weights=amounts)
            seconds = np.bincount(groups, weights=seconds)
        k = seconds.size
        block = max(1, round(k ** (1 / 3)))
        blocks = math.ceil(k / block)
        starts = rng.integers(0, k - block + 1, size=(n, blocks))
        idx = (starts[:, :, None] + np.arange(block)).reshape(n, -1)[:, :k]
        secs = seconds[idx].sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(amounts[idx].sum(axis=1) / secs)


@dataclass(frozen=True, slots=True)
class Delta:
    """One figure against the baseline's: both values, the relative change and its interval."""

    base: float
    value: float
    exact: bool = False
    """A figure without sampling noise (a configuration value): it differs or it does not."""
    ci: tuple[float, float] | None = None
    """95 % interval of ``rel`` (fractions); None: too few samples or no samples to test."""

    @property
    def rel(self) -> float:
        """value / base − 1 (nan when either is unknown or the base is 0)."""
        if not (math.isfinite(self.base) and math.isfinite(self.value)) or self.base == 0:
            return math.nan
        return self.value / self.base - 1.0

    @property
    def beyond_noise(self) -> bool | None:
        """True / False by the test (or, exact, by equality); None when it cannot be told."""
        if self.exact:
            known = math.isfinite(self.base) and math.isfinite(self.value)
            return (self.base != self.value) if known else None
        if self.ci is None:
            return None
        return self.ci[0] > 0 or self.ci[1] < 0


def exact(base: float, value: float) -> Delta:
    return Delta(base, value, exact=True)


def _resamples(stat: Statistic) -> int:
    if isinstance(stat, PooledPercentile) and stat.gaps.size:
        return max(MIN_POOLED_RESAMPLES, min(RESAMPLES, POOLED_BUDGET // stat.gaps.size))
    return RESAMPLES


def relative(base: Statistic, cur: Statistic) -> Delta:
    """The two figures and the interval of their relative difference (see the module doc)."""
    d = Delta(base.point(), cur.point())
    if base.size < MIN_SAMPLES or cur.size < MIN_SAMPLES or not math.isfinite(d.rel):
        return d
    rng = np.random.default_rng(0)
    n = min(_resamples(base), _resamples(cur))
    sa, sb = base.boot(rng, n), cur.boot(rng, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = sb / sa - 1.0
    rel = rel[np.isfinite(rel)]
    if rel.size < n // 2:
        return d
    lo, mid, hi = (float(x) for x in np.percentile(rel, (2.5, 50, 97.5)))
    return Delta(d.base, d.value, ci=(d.rel - (mid - lo), d.rel + (hi - mid)))
