"""Out-of-sample error of the published-point model: leave each point out, refit, predict it.

The profiles' fitted figures (each GPU's bandwidth fraction and per-layer latency, each vLLM
generation's host costs) were fitted to the very points ``bench/sim_fidelity.py`` checks, so its
in-sample ratios say little. Here the datasheet tables are a prior, not a target: every fitted
figure starts from a neutral value with a prior spread (``PRIORS``), and for each point the
figures are refitted to all the *other* points (a linearised least squares on the log ratios,
the Jacobian by finite differences), then the left-out point is predicted with them, exactly. A
figure only that point informed falls back to its prior, which is what an operator without that
measurement would get.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from infmon.sim import profiles
from infmon.sim.fidelity import Point, points


@dataclass(frozen=True, slots=True)
class Prior:
    table: str  # "gpu" or "engine"
    profile: str
    field: str
    mean: float  # neutral: a datasheet-class figure, not fitted to any point
    sd: float  # wide: the prior only decides what no other point informs

    @property
    def key(self) -> str:
        return f"{self.profile}.{self.field}"


PRIORS = (
    Prior("gpu", "A100-80GB", "bandwidth_fraction", 0.85, 0.15),
    Prior("gpu", "A100-80GB", "layer_latency_s", 10e-6, 40e-6),
    Prior("engine", "vllm-0.6-v0", "step_overhead_s", 1e-3, 2e-3),
    Prior("gpu", "H100-80GB", "bandwidth_fraction", 0.85, 0.15),
    Prior("gpu", "H100-80GB", "layer_latency_s", 10e-6, 40e-6),
    Prior("engine", "vllm-v1", "step_overhead_s", 1e-3, 2e-3),
    Prior("engine", "vllm-v1", "request_overhead_s", 20e-3, 30e-3),
    Prior("gpu", "RTX-4090", "bandwidth_fraction", 0.85, 0.15),
    Prior("gpu", "RTX-4090", "layer_latency_s", 10e-6, 40e-6),
    Prior("engine", "vllm-0.7-v0-spec", "step_overhead_s", 1e-3, 2e-3),
    Prior("engine", "vllm-0.7-v0-spec", "per_seq_s", 0.1e-3, 0.2e-3),
)


def _tables() -> dict[str, dict[str, object]]:
    return {"gpu": profiles.GPUS, "engine": profiles.ENGINES}  # type: ignore[dict-item]


def current(prior: Prior) -> float:
    return float(getattr(_tables()[prior.table][prior.profile], prior.field))


@contextlib.contextmanager
def patched(values: dict[str, float]) -> Iterator[None]:
    """The profile tables with some fitted figures replaced (restored afterwards)."""
    saved: list[tuple[dict[str, object], str, object]] = []
    try:
        for p in PRIORS:
            if p.key in values:
                table = _tables()[p.table]
                saved.append((table, p.profile, table[p.profile]))
                table[p.profile] = replace(table[p.profile], **{p.field: values[p.key]})  # type: ignore[type-var]
        yield
    finally:
        for table, name, prof in reversed(saved):
            table[name] = prof


def _log_ratios(pts: list[Point], values: dict[str, float]) -> np.ndarray:
    with patched(values):
        return np.array([math.log(p.measure() / p.published) for p in pts])


@dataclass(frozen=True, slots=True)
class LooResult:
    point: Point
    in_sample: float  # ratio with the shipped profiles
    refit_all: float  # ratio after the prior-based refit on every point
    out_of_sample: float  # ratio with the figures refitted without this point


def _solve(r0: np.ndarray, jac: np.ndarray, keep: np.ndarray, theta0: np.ndarray) -> np.ndarray:
    """delta minimising |r0 + J delta|^2 over the kept rows plus the priors' penalty."""
    mean = np.array([p.mean for p in PRIORS])
    sd = np.array([p.sd for p in PRIORS])
    a = np.vstack([jac[keep], np.diag(1 / sd)])
    b = np.concatenate([-r0[keep], (mean - theta0) / sd])
    delta, *_ = np.linalg.lstsq(a, b, rcond=None)
    return np.asarray(delta)


LOWER = np.array([0.3 if "fraction" in p.field else 0.0 for p in PRIORS])


def _values(theta: np.ndarray) -> dict[str, float]:
    theta = np.maximum(theta, LOWER)
    return {p.key: float(v) for p, v in zip(PRIORS, theta, strict=True)}


def _linearise(pts: list[Point], theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log ratios at ``theta`` and their Jacobian (forward differences)."""
    r = _log_ratios(pts, _values(theta))
    jac = np.zeros((len(pts), len(PRIORS)))
    for j, p in enumerate(PRIORS):
        h = max(abs(theta[j]) * 0.02, p.sd * 0.02)
        bumped = theta.copy()
        bumped[j] += h
        jac[:, j] = (_log_ratios(pts, _values(bumped)) - r) / h
    return r, jac


def leave_one_out(iterations: int = 3) -> list[LooResult]:
    """Gauss-Newton on every point from the priors' means, then each point left out of the
    last linearisation (small steps from the all-point fit) and predicted exactly."""
    pts = points()
    fit_rows = np.array([not p.bound for p in pts])
    shipped = _log_ratios(pts, {})
    theta = np.array([p.mean for p in PRIORS])
    for _ in range(iterations):
        r, jac = _linearise(pts, theta)
        theta = np.maximum(theta + _solve(r, jac, fit_rows, theta), LOWER)
    r, jac = _linearise(pts, theta)
    out = []
    for i, pt in enumerate(pts):
        keep = fit_rows.copy()
        keep[i] = False
        with patched(_values(theta + _solve(r, jac, keep, theta))):
            loo = pt.measure() / pt.published
        out.append(LooResult(pt, math.exp(shipped[i]), math.exp(r[i]), loo))
    return out


def refitted() -> dict[str, float]:
    """The figures the all-point refit gives (for the report beside the shipped ones)."""
    pts = points()
    fit_rows = np.array([not p.bound for p in pts])
    theta = np.array([p.mean for p in PRIORS])
    for _ in range(3):
        r, jac = _linearise(pts, theta)
        theta = np.maximum(theta + _solve(r, jac, fit_rows, theta), LOWER)
    return _values(theta)
