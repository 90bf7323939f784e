"""What-ifs from a fitted server (``infmon sim --predict --fitted FILE``), each with an error
band, and the held-out check of a fit (``--holdout``).

A forecast replays the asked level through the engine priced by the fitted costs; each figure
is ``a @ values`` for a cost vector ``a`` (``infmon.sim.levels``), so its variance is
``a' Cov a`` from the fit plus the fit's own scatter (``rms_rel`` of the value): the band is
1.96 standard errors (95%). A question the fit never saw (more concurrency, a longer prompt, a
bigger batch, a drafter) is answered, and said to leave the fitted range.

Past the fitted levels a fit whose growth's form was assumed (levels up to c=4 cannot show
whether the growth slows, and no wider sweep's shape was carried: ``FittedCost.shape_from``) may
be wrong by its form, not by its noise: on the real vLLM here the line in ``c`` overshot c=16 by
20-70% where the rate form held, and in the hours whose TPOT grew as a line the rate form
undershot it by up to 27%. There the band spans the other form too (``other_form``: the same
server through the highest fitted level, grown the other way), added to the noise's variance as
a 95% range, so a what-if that leaves the fitted levels says how far the assumption reaches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from infmon.sim.costmodel import NONE_UNLESS_FITTED, PARAMS, FittedCost
from infmon.sim.fit import FitResult, fit, with_cost
from infmon.sim.growth import Growth
from infmon.sim.levels import LevelVectors, Shape, replay
from infmon.sim.observation import Observation
from infmon.sim.roofline import EngineConfig

Z95 = 1.96


@dataclass(frozen=True, slots=True)
class Band:
    value: float
    stderr: float

    @property
    def half_width(self) -> float:
        return Z95 * self.stderr

    def contains(self, x: float) -> bool:
        return abs(x - self.value) <= self.half_width

    def text(self, scale: float = 1.0, digits: int = 2) -> str:
        v, h = self.value * scale, self.half_width * scale
        return f"{v:.{digits}f} ± {h:.{digits}f}"


@dataclass(frozen=True, slots=True)
class Forecast:
    shape: Shape
    tpot_s: Band
    ttft_mean_s: Band
    ttft_p50_s: Band
    output_tok_s: Band
    queue_ttft_mean_s: Band
    """TTFT from the scheduler's queue on (vLLM's per-request timings): no API server time."""
    queue_ttft_p50_s: Band
    prefill_s: Band
    """Mean time from a request's first step to its first token (vLLM: scheduled → first)."""
    batch_max: int
    preemptions: int
    outside: tuple[str, ...]  # how the question leaves the fitted range (empty: inside)


def _band(a: np.ndarray, cost: FittedCost, other: float = math.nan) -> Band:
    """``a @ values`` with its noise (the fit's covariance and scatter) and, when ``other`` is
    the other growth form's figure, the gap to it as a 95% range."""
    value = float(a @ cost.vector)
    var = float(a @ cost.covariance @ a) + (cost.rms_rel * value) ** 2
    if math.isfinite(other):
        var += ((other - value) / Z95) ** 2
    return Band(value, math.sqrt(max(var, 0.0)))


def other_form(base: EngineConfig, cost: FittedCost, shape: Shape) -> FittedCost | None:
    """The fitted server grown the other way past its highest fitted level, when its form was
    assumed and ``shape`` reaches past those levels (None otherwise). The two forms meet at
    the highest fitted level ``hi``, whose step lasts ``t`` (its TPOT): the rate form's costs
    per token/s streamed are the line's per sequence times ``t`` (a step of ``n`` pays
    ``seq_s x n / t``; a new request waits ``frontend_stream_s x (c - 1) / t``)."""
    hi = cost.fitted_range.concurrency[1]
    assumed = not cost.shape_from and cost.seq_exponent == cost.stream_exponent == 1.0
    if not assumed or shape.concurrency <= hi:
        return None
    at_hi = replay(with_cost(base, cost), cost, replace(shape, concurrency=hi))
    t = float(at_hi.tpot @ cost.vector)
    if not t > 0:
        return None
    rate = cost.growth == "rate"
    f = 1.0 / t if rate else t
    return replace(
        cost.scaled({"seq_s": f, "frontend_stream_s": f}), growth="line" if rate else "rate"
    )


def forecast(base: EngineConfig, cost: FittedCost, shape: Shape) -> Forecast:
    """One closed-loop level on the fitted server (``base``'s limits, ``cost``'s prices); past
    the fitted levels of an assumed form, each band spans the other form's figure too."""
    vec = replay(with_cost(base, cost), cost, shape)
    alt = other_form(base, cost, shape)
    alt_vec = replay(with_cost(base, alt), alt, shape) if alt is not None else None

    def other(pick: Callable[[LevelVectors], np.ndarray]) -> float:
        """The other form's figure (NaN: no other form)."""
        if alt is None or alt_vec is None:
            return math.nan
        return float(pick(alt_vec) @ alt.vector)

    def band(pick: Callable[[LevelVectors], np.ndarray]) -> Band:
        return _band(pick(vec), cost, other(pick))

    per_token = band(lambda v: v.time_per_token)
    tok_s = 1.0 / per_token.value if per_token.value > 0 else math.nan
    outside = outside_range(cost, shape, vec.batch_max)
    if alt is not None:
        name = "the rate form" if alt.growth == "rate" else "the line"
        outside += (
            f"the band spans {name}'s forecast too (TPOT {other(lambda v: v.tpot) * 1e3:.2f} "
            f"ms, TTFT p50 {other(lambda v: v.ttft_p50) * 1e3:.2f} ms)",
        )
    return Forecast(
        shape=shape,
        tpot_s=band(lambda v: v.tpot),
        ttft_mean_s=band(lambda v: v.ttft_mean),
        ttft_p50_s=band(lambda v: v.ttft_p50),
        output_tok_s=Band(tok_s, tok_s * per_token.stderr / per_token.value),
        queue_ttft_mean_s=band(lambda v: v.queue_ttft_mean),
        queue_ttft_p50_s=band(lambda v: v.queue_ttft_p50),
        prefill_s=band(lambda v: v.prefill),
        batch_max=vec.batch_max,
        preemptions=vec.preemptions,
        outside=outside + _unfitted(cost, vec.tpot + vec.ttft_mean),
    )


def _unfitted(cost: FittedCost, used: np.ndarray) -> tuple[str, ...]:
    """Costs this forecast uses that no fitted session determined (not one whose absence
    means none: ``NONE_UNLESS_FITTED``)."""
    names = [
        n
        for i, n in enumerate(PARAMS)
        if used[i] > 0 and not cost.sources[i] and n not in NONE_UNLESS_FITTED
    ]
    return (f"it uses costs no session fitted: {', '.join(names)}",) if names else ()


def outside_range(cost: FittedCost, shape: Shape, batch_max: int) -> tuple[str, ...]:
    r, out = cost.fitted_range, []
    lo, hi = r.concurrency
    if not lo <= shape.concurrency <= hi:
        out.append(f"concurrency {shape.concurrency} is outside the fitted {lo}-{hi}")
        if shape.concurrency > hi and not cost.shape_from:
            how = "with the tokens/s (the rate form)" if cost.growth == "rate" else "as linear"
            out.append(
                f"the growth past the fitted levels is taken {how} (they cannot show whether "
                "it slows: --fit --shape-from a profile of a wider sweep of this server)"
            )
    if batch_max > r.batch_max:
        out.append(f"batches of up to {batch_max} sequences; the fit saw {r.batch_max} at most")
    for what, value, (a, b) in (
        ("prompt", shape.prompt_tokens, r.prompt_tokens),
        ("output", shape.output_tokens, r.output_tokens),
    ):
        if not a * 0.9 <= value <= b * 1.1:
            out.append(f"{what} of {value} tokens; the fit saw {a:.0f}-{b:.0f}")
    if shape.speculative_k and shape.speculative_k not in r.spec_k:
        seen = ", ".join(map(str, r.spec_k)) or "none"
        out.append(f"speculative decoding k={shape.speculative_k}; spec sessions fitted: {seen}")
    return tuple(out)


@dataclass(frozen=True, slots=True)
class HeldOut:
    """A level left out of the fit, against its forecast."""

    observation: Observation
    forecast: Forecast

    def band(self, figure: str) -> Band:
        """The forecast of a figure the observation carries (``fit.FIGURES``)."""
        f = self.forecast
        return {
            "tpot": f.tpot_s,
            "ttft": f.ttft_mean_s,
            "tok_s": f.output_tok_s,
            "server_tpot": f.tpot_s,
            "server_ttft": f.queue_ttft_mean_s,
            "server_prefill": f.prefill_s,
        }[figure]

    def errors(self) -> dict[str, float]:
        """Relative error of each figure the observation carries (forecast / measured - 1)."""
        o = self.observation
        return {k: self.band(k).value / o.measured(k) - 1 for k, _ in o.targets()}

    def inside_band(self) -> dict[str, bool]:
        o = self.observation
        return {k: self.band(k).contains(o.measured(k)) for k, _ in o.targets()}


def holdout(
    base: EngineConfig,
    obs: list[Observation],
    levels: set[int],
    carried: Growth | None = None,
    rate: bool | None = None,
) -> tuple[FitResult, list[HeldOut]]:
    """Fit without the levels at ``levels`` concurrency, then forecast each of them
    (``carried`` and ``rate`` as ``fit`` takes them)."""
    kept = [o for o in obs if o.concurrency not in levels]
    left = [o for o in obs if o.concurrency in levels]
    result = fit(base, kept, carried=carried, rate=rate)
    by_shape: dict[Shape, Forecast] = {}  # the rounds of one level share a shape: one forecast
    for o in left:
        if o.shape not in by_shape:
            by_shape[o.shape] = forecast(base, result.cost, o.shape)
    return result, [HeldOut(o, by_shape[o.shape]) for o in left]
