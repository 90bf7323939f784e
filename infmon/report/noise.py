"""Is a difference beyond noise? Bootstrap confidence intervals over requests (numpy)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

RESAMPLES = 1000
MAX_SAMPLE = 4000
METHOD = (
    f"bootstrap 95% CI of the relative difference (run − baseline) / baseline: "
    f"{RESAMPLES} resamples of requests (at most {MAX_SAMPLE} per step), seed 0; "
    "medians for latencies, mean per-request decode rate (tokens / E2EL) for throughput; "
    "'beyond noise' when the interval excludes 0"
)


def _clean(values: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    if a.size > MAX_SAMPLE:
        a = rng.choice(a, MAX_SAMPLE, replace=False)
    return a


def _boot(
    a: np.ndarray, stat: Callable[[np.ndarray], np.ndarray], rng: np.random.Generator
) -> np.ndarray:
    idx = rng.integers(0, a.size, size=(RESAMPLES, a.size))
    return stat(a[idx])


def relative_ci(
    base: Sequence[float], other: Sequence[float], statistic: str = "median"
) -> tuple[float, float] | None:
    """95% CI of ``stat(other) / stat(base) − 1``; None when either side has < 5 samples."""
    rng = np.random.default_rng(0)
    a, b = _clean(base, rng), _clean(other, rng)
    if a.size < 5 or b.size < 5:
        return None
    fn = (
        (lambda m: np.median(m, axis=1))
        if statistic == "median"
        else (lambda m: np.mean(m, axis=1))
    )
    sa, sb = _boot(a, fn, rng), _boot(b, fn, rng)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = sb / sa - 1.0
    rel = rel[np.isfinite(rel)]
    if rel.size == 0:
        return None
    lo, hi = np.percentile(rel, [2.5, 97.5])
    return float(lo), float(hi)


def beyond_noise(ci: tuple[float, float] | None) -> bool | None:
    return None if ci is None else (ci[0] > 0 or ci[1] < 0)
