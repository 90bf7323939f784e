"""Counter → rate across resets; histogram quantiles against hand computations."""

from __future__ import annotations

import math

import pytest

from infmon.model.base.rates import counter_increase, counter_rate, ratio
from infmon.model.server.histogram import Histogram, bucket_quantile, delta, merge, window_stat

INF = math.inf


def test_counter_rate_normal_and_reset() -> None:
    assert counter_rate(100.0, 160.0, 2.0) == (30.0, False)
    # restart: 160 → 12 means it counted 12 since the restart, never negative
    assert counter_rate(160.0, 12.0, 2.0) == (6.0, True)
    assert counter_increase(None, 5.0) == (None, False)
    assert counter_rate(1.0, 2.0, None) == (None, False)
    assert ratio(1.0, 0.0) is None and ratio(None, 2.0) is None and ratio(1.0, 4.0) == 0.25


def test_quantile_hand_computed() -> None:
    bounds = (0.1, 0.5, 1.0, INF)
    cum = (10.0, 30.0, 40.0, 40.0)
    # p50: rank 20 falls in (0.1, 0.5] holding 20 obs, 10 below → 0.1 + 0.4 * 10/20 = 0.3
    assert bucket_quantile(0.5, bounds, cum) == pytest.approx(0.3)
    # p90: rank 36 in (0.5, 1.0] holding 10, 30 below → 0.5 + 0.5 * 6/10 = 0.8
    assert bucket_quantile(0.9, bounds, cum) == pytest.approx(0.8)
    # p10: rank 4 in the first bucket, lower bound 0 → 0.1 * 4/10 = 0.04
    assert bucket_quantile(0.1, bounds, cum) == pytest.approx(0.04)


def test_quantile_edge_cases_as_promql() -> None:
    # rank lands in +Inf → the highest finite bound
    assert bucket_quantile(0.99, (1.0, 2.0, INF), (1.0, 2.0, 10.0)) == 2.0
    assert math.isnan(bucket_quantile(0.5, (1.0, 2.0), (1.0, 2.0)))  # no +Inf bucket
    assert math.isnan(bucket_quantile(0.5, (1.0, INF), (0.0, 0.0)))  # no observations
    assert bucket_quantile(-0.1, (1.0, INF), (1.0, 1.0)) == -INF
    assert bucket_quantile(1.1, (1.0, INF), (1.0, 1.0)) == INF
    # non-monotonic counts are made monotonic first
    assert bucket_quantile(0.5, (1.0, 2.0, INF), (4.0, 2.0, 4.0)) == pytest.approx(0.5)


def test_window_delta_mean_and_reset() -> None:
    a = Histogram((0.1, 1.0, INF), (5.0, 8.0, 10.0), sum=4.0, count=10.0)
    b = Histogram((0.1, 1.0, INF), (5.0, 18.0, 20.0), sum=9.0, count=20.0)
    d, reset = delta(a, b)
    assert not reset and d.cumulative == (0.0, 10.0, 10.0) and d.sum == 5.0 and d.count == 10.0
    st = window_stat(d)
    assert st is not None and st.mean == 0.5 and st.p50 == pytest.approx(0.55)
    restarted = Histogram((0.1, 1.0, INF), (1.0, 1.0, 1.0), sum=0.05, count=1.0)
    d2, reset2 = delta(b, restarted)
    assert reset2 and d2 == restarted


def test_empty_window_is_unknown_not_zero() -> None:
    h = Histogram((0.1, INF), (0.0, 0.0), sum=0.0, count=0.0)
    st = window_stat(h)
    assert st is not None and st.count == 0.0
    assert st.mean is None and st.p50 is None and st.p99 is None
    assert window_stat(None) is None


def test_merge_is_sum_by_le() -> None:
    a = Histogram((1.0, INF), (1.0, 2.0), 1.5, 2.0)
    b = Histogram((1.0, INF), (3.0, 3.0), 2.0, 3.0)
    assert merge([a, b]) == Histogram((1.0, INF), (4.0, 5.0), 3.5, 5.0)
    assert merge([]) is None
