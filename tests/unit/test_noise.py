"""The noise test: each figure, its delta and its interval are one computation (issue 17,
finding 12: a delta outside its own interval, because the interval was of another statistic)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infmon.model.compare import noise
from infmon.model.records.measures import Distribution


def _lognormal(seed: int, n: int, scale: float = 1.0) -> np.ndarray:
    return scale * np.random.default_rng(seed).lognormal(0.0, 0.4, n)


def test_percentile_point_is_the_step_tables_percentile():
    a = _lognormal(1, 301)
    d = Distribution.of(a)
    assert noise.Percentile(a, 50).point() == d.p50
    assert noise.Percentile(a, 90).point() == d.p90


def test_block_rate_point_is_tokens_over_measured_seconds():
    tokens, secs = np.array([10.0, 12, 9, 11, 3]), np.array([1.0, 1, 1, 1, 0.25])
    assert noise.BlockRate(tokens, secs).point() == pytest.approx(45 / 4.25)


def test_pooled_percentile_point_is_the_pooled_itl():
    gaps = [_lognormal(s, 20, 0.02) for s in range(30)]
    stat = noise.PooledPercentile(np.concatenate(gaps), np.array([g.size for g in gaps]), 50)
    assert stat.point() == Distribution.of(np.concatenate(gaps)).p50
    assert stat.size == 30


@pytest.mark.parametrize("seed", range(12))
def test_the_delta_lies_inside_its_own_interval(seed):
    rng = np.random.default_rng(seed)
    n_a, n_b = rng.integers(5, 400, 2)
    shift = rng.uniform(0.7, 1.3)
    a, b = _lognormal(seed, n_a), _lognormal(seed + 100, n_b, shift)
    bins_a, bins_b = rng.poisson(50, 20).astype(float), rng.poisson(50 * shift, 20).astype(float)
    ga = [_lognormal(seed + i, 8) for i in range(int(n_a))]
    gb = [_lognormal(seed + 500 + i, 8, shift) for i in range(int(n_b))]
    pairs = [
        (noise.Percentile(a, 50), noise.Percentile(b, 50)),
        (noise.Percentile(a, 90), noise.Percentile(b, 90)),
        (noise.BlockRate(bins_a, np.ones(20)), noise.BlockRate(bins_b, np.ones(20))),
        (
            noise.PooledPercentile(np.concatenate(ga), np.full(len(ga), 8), 50),
            noise.PooledPercentile(np.concatenate(gb), np.full(len(gb), 8), 50),
        ),
    ]
    for sa, sb in pairs:
        d = noise.relative(sa, sb)
        assert d.rel == pytest.approx(sb.point() / sa.point() - 1)
        if d.ci is not None:
            assert d.ci[0] <= d.rel <= d.ci[1], (type(sa).__name__, d)
            assert d.beyond_noise == (d.ci[0] > 0 or d.ci[1] < 0)


def test_same_distribution_is_within_noise_and_a_shift_is_beyond():
    a, b = _lognormal(1, 300), _lognormal(2, 300)
    assert noise.relative(noise.Percentile(a, 50), noise.Percentile(b, 50)).beyond_noise is False
    slow = noise.relative(noise.Percentile(a, 50), noise.Percentile(1.3 * b, 50))
    assert slow.beyond_noise is True and slow.ci[0] > 0


def test_throughput_noise_sees_the_bins_spread():
    rng = np.random.default_rng(3)
    steady = noise.BlockRate(np.full(30, 100.0), np.ones(30))
    same = noise.BlockRate(rng.normal(100, 20, 30), np.ones(30))
    assert noise.relative(steady, same).beyond_noise is False
    low = noise.BlockRate(rng.normal(90, 2, 30), np.ones(30))
    assert noise.relative(steady, low).beyond_noise is True


def test_too_few_samples_is_untested_and_exact_figures_compare_by_equality():
    d = noise.relative(noise.Percentile([1.0, 2, 3], 50), noise.Percentile(np.ones(50), 50))
    assert d.ci is None and d.beyond_noise is None and math.isfinite(d.rel)
    assert noise.exact(100.0, 100.0).beyond_noise is False
    assert noise.exact(100.0, 80.0).beyond_noise is True and noise.exact(
        100.0, 80.0
    ).rel == pytest.approx(-0.2)
    assert noise.exact(math.nan, 80.0).beyond_noise is None


def test_pooled_bootstrap_resamples_requests_not_gaps():
    """Two requests, one fast and one slow: resampling gaps would make the median's interval
    tiny; resampling the requests (with all their gaps) keeps it as wide as the requests are."""
    fast, slow = np.full(500, 0.01), np.full(500, 0.03)
    stat = noise.PooledPercentile(np.concatenate([fast, slow] * 3), np.array([500] * 6), 50)
    draws = stat.boot(np.random.default_rng(0), 400)
    assert set(np.round(draws, 3)) <= {0.01, 0.03} and len(set(np.round(draws, 3))) == 2


def test_long_steps_bootstrap_in_bounded_memory():
    stat = noise.BlockRate(np.ones(86_400), np.ones(86_400))
    assert stat.boot(np.random.default_rng(0), 50).shape == (50,)
