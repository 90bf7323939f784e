"""Prometheus histograms: window deltas, means and quantiles exactly as PromQL computes them.

``bucket_quantile`` follows Prometheus' ``histogram_quantile`` (promql/quantile.go): sort by
upper bound, require a ``+Inf`` bucket, make counts monotonic, find the bucket holding the rank,
interpolate linearly inside it; the ``+Inf`` bucket answers with the highest finite bound.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infmon.model.server.snapshot import WindowStat


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative bucket counts by upper bound (ascending), plus ``_sum`` and ``_count``."""

    bounds: tuple[float, ...] = ()
    cumulative: tuple[float, ...] = ()
    sum: float | None = None
    count: float | None = None

    @property
    def observations(self) -> float | None:
        if self.count is not None:
            return self.count
        if self.bounds and math.isinf(self.bounds[-1]):
            return self.cumulative[-1]
        return None


def merge(hists: Iterable[Histogram]) -> Histogram | None:
    """Sum histograms bucket by bucket (PromQL ``sum by (le)``); None when there are none."""
    counts: dict[float, float] = {}
    total_sum: float | None = None
    total_count: float | None = None
    any_seen = False
    for h in hists:
        any_seen = True
        for b, c in zip(h.bounds, h.cumulative, strict=True):
            counts[b] = counts.get(b, 0.0) + c
        if h.sum is not None:
            total_sum = (total_sum or 0.0) + h.sum
        if h.count is not None:
            total_count = (total_count or 0.0) + h.count
    if not any_seen:
        return None
    bounds = tuple(sorted(counts))
    return Histogram(bounds, tuple(counts[b] for b in bounds), total_sum, total_count)


def delta(prev: Histogram | None, cur: Histogram) -> tuple[Histogram, bool]:
    """The observations made between two readings, and whether the histogram was reset."""
    if prev is None:
        return cur, False
    if prev.bounds != cur.bounds:
        return cur, True
    diffs = [c - p for c, p in zip(cur.cumulative, prev.cumulative, strict=True)]
    count_d = None if cur.count is None or prev.count is None else cur.count - prev.count
    if any(d < 0 for d in diffs) or (count_d is not None and count_d < 0):
        return cur, True
    sum_d = None if cur.sum is None or prev.sum is None else cur.sum - prev.sum
    return Histogram(cur.bounds, tuple(diffs), sum_d, count_d), False


def bucket_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float:
    """PromQL ``histogram_quantile(q, …)`` over one set of cumulative buckets (nan = none)."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    pairs = sorted(zip(bounds, cumulative, strict=True))
    if not pairs or not math.isinf(pairs[-1][0]):
        return math.nan
    ub = [b for b, _ in pairs]
    counts = [c for _, c in pairs]
    for i in range(1, len(counts)):  # ensureMonotonic
        counts[i] = max(counts[i], counts[i - 1])
    if len(counts) < 2:
        return math.nan
    observations = counts[-1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return ub[-2]
    if b == 0 and ub[0] <= 0:
        return ub[0]
    start, end, count = 0.0, ub[b], counts[b]
    if b > 0:
        start = ub[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (end - start) * (rank / count)


def quantile_bucket(q: float, h: Histogram) -> tuple[float, float] | None:
    """The bucket ``bucket_quantile`` interpolates ``q`` in, as (lower, upper bound); None
    when there is none or it is the ``+Inf`` bucket."""
    pairs = sorted(zip(h.bounds, h.cumulative, strict=True))
    if len(pairs) < 2 or not math.isinf(pairs[-1][0]):
        return None
    counts = list(itertools.accumulate((c for _, c in pairs), max))  # ensureMonotonic
    if not counts[-1] > 0:
        return None
    b = next(i for i, c in enumerate(counts) if c >= q * counts[-1])
    if b == len(counts) - 1 or pairs[b][0] <= 0:
        return None
    return (pairs[b - 1][0] if b > 0 else 0.0, pairs[b][0])


def _known(x: float) -> float | None:
    return None if math.isnan(x) or math.isinf(x) else x


def window_stat(h: Histogram | None) -> WindowStat | None:
    """Mean (Δsum/Δcount) and p50/p90/p99 of a (delta) histogram; None when there is none."""
    if h is None:
        return None
    n = h.observations
    mean = h.sum / n if h.sum is not None and n else None
    qs = [
        _known(bucket_quantile(q, h.bounds, h.cumulative)) if n else None for q in (0.5, 0.9, 0.99)
    ]
    low, high = (quantile_bucket(0.5, h) if n else None) or (None, None)
    return WindowStat(
        count=n, mean=mean, p50=qs[0], p90=qs[1], p99=qs[2], p50_low=low, p50_high=high
    )
