"""The mergeable log-bucket histogram: merge is addition, quantiles within 1 % of numpy's."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.model.base.loghist import NBUCKETS, LogHistogram, bucket_index, representative

positive = st.floats(min_value=1e-6, max_value=3000.0, allow_nan=False, allow_infinity=False)


@st.composite
def heavy_tailed(draw: st.DrawFn) -> np.ndarray:
    """Latencies as servers produce them: lognormal bodies, Pareto tails, a few far outliers."""
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 3000))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["lognormal", "pareto", "mixed"]))
    if kind == "lognormal":
        v = rng.lognormal(mean=draw(st.floats(-7, 2)), sigma=draw(st.floats(0.01, 2.5)), size=n)
    elif kind == "pareto":
        v = (rng.pareto(draw(st.floats(0.5, 3.0)), size=n) + 1) * draw(st.floats(1e-4, 1.0))
    else:
        v = np.concatenate([rng.lognormal(-4, 0.3, size=n), rng.uniform(5, 50, size=n // 50 + 1)])
    return np.clip(v, 1e-8, 4000.0)


@settings(max_examples=200, deadline=None)
@given(heavy_tailed(), st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]))
def test_quantiles_are_within_one_percent_of_numpy_percentile(values, q) -> None:
    h = LogHistogram()
    h.add(values)
    want = float(np.percentile(values, 100 * q))
    got = h.quantile(q)
    assert math.isclose(got, want, rel_tol=0.01), (got, want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(positive, max_size=50), min_size=3, max_size=3))
def test_merge_is_associative_and_equals_the_histogram_of_all_values(parts) -> None:
    a, b, c = (LogHistogram() for _ in range(3))
    for h, vals in zip((a, b, c), parts, strict=True):
        h.add(vals)
    left = a.copy()
    left.merge(b)
    left.merge(c)  # (a + b) + c
    bc = b.copy()
    bc.merge(c)
    right = a.copy()
    right.merge(bc)  # a + (b + c)
    whole = LogHistogram()
    whole.add([v for p in parts for v in p])
    for h in (left, right):
        assert np.array_equal(h.counts, whole.counts)
        assert h.count == whole.count
        assert h.minimum == whole.minimum and h.maximum == whole.maximum
        assert math.isclose(h.total, whole.total, rel_tol=1e-9, abs_tol=1e-12)


@given(st.lists(positive, min_size=1, max_size=200))
def test_add_one_and_add_agree_and_survive_the_wire(values) -> None:
    a, b = LogHistogram(), LogHistogram()
    a.add(values)
    for v in values:
        b.add_one(v)
    assert np.array_equal(a.counts, b.counts)
    back = LogHistogram.from_sparse(a.sparse())
    assert np.array_equal(back.counts, a.counts) and back.count == a.count
    assert back.quantile(0.5) == a.quantile(0.5)


def test_each_bucket_stands_for_its_values_within_half_a_percent() -> None:
    v = np.geomspace(1e-8, 4000, 200_000)
    idx = bucket_index(v)
    reps = np.array([representative(int(i)) for i in idx])
    assert np.all(np.abs(reps / v - 1) < 0.0055)
    assert idx.min() >= 1 and idx.max() < NBUCKETS - 1


def test_empty_nan_negative_and_merged_windows() -> None:
    h = LogHistogram()
    assert math.isnan(h.quantile(0.5)) and math.isnan(h.mean)
    h.add([math.nan, -1.0])
    assert h.count == 0
    w1, w2 = LogHistogram(), LogHistogram()
    w1.add([0.010] * 10)
    w2.add([0.100] * 30)
    total = LogHistogram.merged([w1, w2])
    assert total.count == 40 and math.isclose(total.quantile(0.5), 0.1, rel_tol=0.01)
    assert total.quantile(0.0) == 0.010 and total.quantile(1.0) == 0.100
    z = LogHistogram()
    z.add([0.0, 0.0, 1.0])
    assert z.quantile(0.0) == 0.0 and z.quantile(1.0) == 1.0
