"""What a load search reads from its probes: the probes of one level pooled, a monotone fit of
SLO attainment across levels, and how sure a pooled attainment is on its side of the bound.

Attainment (the share of a step's requests that met every SLO bound) falls as the load rises;
measured, it is noisy and a re-measured level has several values. The fit is the weighted
isotonic (non-increasing) regression of attainment on level, pool-adjacent-violators with the
requests as weights, so a noisy pair never reads as "passes at 40, fails at 32, passes at 48".

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.records.measures import SLO, Distribution
from infmon.model.records.stats import StepStats
from infmon.model.steps.result import StepResult

NAN = math.nan
Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Probe:
    """One measured step of a search: its level and the figures the search and verdict use."""

    level: float
    step: int
    """The step's index in the session (its row in the bench table and the report)."""
    requests: int
    """Measured requests that ended (completed or failed): attainment's denominator."""
    good: int
    """Of those, the requests that met every SLO bound."""
    output_tok_s: float
    tok_s_per_user: float
    """What one user sees while streaming: 1 / mean TPOT."""
    goodput_req_s: float
    ttft_p90_ms: float = NAN
    tpot_p90_ms: float = NAN
    e2el_p50_ms: float = NAN
    margin: float = NAN
    """The worst SLO bound's latency at the required attainment's quantile over the bound
    (1.0: exactly at the bound); smoother in load than attainment, so bisection aims by it."""

    @property
    def attainment(self) -> float:
        return self.good / self.requests if self.requests else NAN


@dataclass(frozen=True, slots=True)
class LevelFit:
    """Every probe of one level pooled, with the monotone fit's attainment there."""

    level: float
    probes: tuple[Probe, ...]
    requests: int
    good: int
    fitted: float
    """The isotonic fit's attainment at this level."""
    margin: float
    output_tok_s: float
    tok_s_per_user: float
    goodput_req_s: float

    @property
    def attainment(self) -> float:
        return self.good / self.requests if self.requests else NAN


def _wmean(values: Sequence[float], weights: Sequence[float]) -> float:
    pairs = [(v, w) for v, w in zip(values, weights, strict=True) if not math.isnan(v)]
    total = sum(w for _, w in pairs)
    if not pairs:
        return NAN
    if total <= 0:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / total


def isotonic_decreasing(values: Sequence[float], weights: Sequence[float]) -> list[float]:
    """The weighted least-squares non-increasing fit of ``values`` (pool adjacent violators).
    A nan value carries no weight and takes its block's fitted value."""
    blocks: list[list[float]] = []  # [weighted sum, weight, count]
    for v, w in zip(values, weights, strict=True):
        w = 0.0 if math.isnan(v) else max(w, 0.0)
        blocks.append([v * w if w else 0.0, w, 1.0])
        while len(blocks) > 1 and _mean(blocks[-2]) < _mean(blocks[-1]):
            s, wt, n = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += wt
            blocks[-1][2] += n
    out: list[float] = []
    for s, wt, n in blocks:
        out.extend([s / wt if wt else NAN] * int(n))
    return out


def _mean(block: list[float]) -> float:
    """A block's fitted value; a weightless block never forces a merge."""
    return block[0] / block[1] if block[1] else -math.inf


def fit_levels(probes: Sequence[Probe]) -> list[LevelFit]:
    """The probes pooled per level, by level, with the monotone attainment fit."""
    by_level: dict[float, list[Probe]] = {}
    for p in probes:
        by_level.setdefault(p.level, []).append(p)
    levels = sorted(by_level)
    pooled = [by_level[lv] for lv in levels]
    att = [_pooled_attainment(ps) for ps in pooled]
    fitted = isotonic_decreasing(att, [sum(p.requests for p in ps) for ps in pooled])
    out = []
    for lv, ps, f in zip(levels, pooled, fitted, strict=True):
        w = [float(p.requests) for p in ps]
        out.append(
            LevelFit(
                lv,
                tuple(ps),
                sum(p.requests for p in ps),
                sum(p.good for p in ps),
                f,
                _wmean([p.margin for p in ps], w),
                _wmean([p.output_tok_s for p in ps], w),
                _wmean([p.tok_s_per_user for p in ps], w),
                _wmean([p.goodput_req_s for p in ps], w),
            )
        )
    return out


def _pooled_attainment(probes: Sequence[Probe]) -> float:
    n = sum(p.requests for p in probes)
    return sum(p.good for p in probes) / n if n else NAN


def pass_confidence(good: int, requests: int, target: float) -> float:
    """How sure it is that the level's true attainment is at least ``target``: the normal
    approximation with the Agresti–Coull adjustment (two successes and two failures added),
    so 20 of 20 good is not certainty. Requests of one step are treated as independent (they
    are not quite: they share the server's batch), so this is an indication, not a guarantee."""
    if requests <= 0:
        return NAN
    n = requests + Z95**2
    p = (good + Z95**2 / 2) / n
    se = math.sqrt(p * (1 - p) / n)
    return 0.5 * (1 + math.erf((good / requests - target) / (se * math.sqrt(2))))


def crossing(lo: LevelFit, hi: LevelFit, target: float) -> float:
    """Where the load crosses the SLO between a passing and a failing level: by the latency
    margin (log-linear, margin 1 at the bound) when both have one, else by the fitted
    attainment (linear); the bracket's midpoint when neither tells."""
    if lo.margin > 0 and hi.margin > 0 and hi.margin != lo.margin:
        t = -math.log(lo.margin) / (math.log(hi.margin) - math.log(lo.margin))
    elif lo.fitted > hi.fitted:
        t = (lo.fitted - target) / (lo.fitted - hi.fitted)
    else:
        t = 0.5
    t = min(1.0, max(0.0, t)) if math.isfinite(t) else 0.5
    return lo.level + t * (hi.level - lo.level)


def _at_quantile(d: Distribution, attainment: float) -> float:
    """The distribution's percentile nearest above the required attainment (p50…p99)."""
    q = attainment * 100
    for pct, value in ((50, d.p50), (90, d.p90), (95, d.p95), (99, d.p99)):
        if q <= pct + 1e-9:
            return value
    return d.p99


def slo_margin(stats: StepStats, slo: SLO, attainment: float) -> float:
    """The worst bound's latency at the attainment's quantile over the bound (nan: no bound)."""
    pairs = ((stats.ttft, slo.ttft_s), (stats.tpot, slo.tpot_s), (stats.e2el, slo.e2el_s))
    ratios = [_at_quantile(d, attainment) / b for d, b in pairs if b]
    ratios = [r for r in ratios if not math.isnan(r)]
    return max(ratios) if ratios else NAN


def probe_of(result: StepResult, slo: SLO | None, attainment: float) -> Probe:
    """A settled step as a search probe (the ledger's figures, nothing recomputed)."""
    s = result.stats
    level = float(s.concurrency if s.concurrency is not None else (s.rate or 0.0))
    requests = s.completed + s.failed
    good = round(s.slo_attainment * requests) if not math.isnan(s.slo_attainment) else 0
    per_user = 1.0 / s.tpot.mean if s.tpot.mean > 0 else NAN
    return Probe(
        level,
        result.index,
        requests,
        good,
        s.output_throughput_tok_s,
        per_user,
        s.goodput_req_s,
        s.ttft.p90 * 1e3,
        s.tpot.p90 * 1e3,
        s.e2el.p50 * 1e3,
        slo_margin(s, slo, attainment) if slo is not None else NAN,
    )
