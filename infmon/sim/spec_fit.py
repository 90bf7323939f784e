"""Where speculative decoding stops paying on a fitted server: the break-even concurrency.

At low concurrency a step is memory-bound and drafting buys tokens almost free; as the batch
grows, the drafting passes and the verification of ``k + 1`` tokens per sequence (compute-bound
sooner) cost more than the accepted tokens bring. Each concurrency, doubling, is forecast with
and without the drafter; the break-even lies where the ratio of output tokens/s crosses 1
(interpolated on a log scale between the two levels around it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from infmon.sim.costmodel import FittedCost
from infmon.sim.forecast import Forecast, forecast
from infmon.sim.levels import Shape
from infmon.sim.roofline import EngineConfig


@dataclass(frozen=True, slots=True)
class BreakEven:
    levels: tuple[int, ...]
    speedups: tuple[float, ...]  # spec tok/s / no-spec tok/s per level
    concurrency: float | None  # where the speed-up crosses 1 (None: never in the scan)
    outside: tuple[str, ...]

    def lines(self) -> list[str]:
        out = ["speculative decoding against none, output tok/s ratio per concurrency:"]
        out += [f"  c={c:<5} {s:.2f}x" for c, s in zip(self.levels, self.speedups, strict=True)]
        if self.concurrency is None:
            if self.speedups and self.speedups[0] <= 1:
                out.append("break-even: never pays, even at c=1")
            else:
                out.append(f"break-even: pays up to c={self.levels[-1]} at least")
        else:
            out.append(f"break-even: spec stops paying at about c={self.concurrency:.0f}")
        out += [f"  outside the fitted range: {why}" for why in self.outside]
        return out


def speedup_at(
    base: EngineConfig, cost: FittedCost, shape: Shape
) -> tuple[float, Forecast, Forecast]:
    spec = forecast(base, cost, shape)
    plain = forecast(base, cost, replace(shape, speculative_k=0, acceptance=()))
    return spec.output_tok_s.value / plain.output_tok_s.value, spec, plain


def break_even(
    base: EngineConfig, cost: FittedCost, shape: Shape, max_concurrency: int = 512
) -> BreakEven:
    """Scan c = 1, 2, 4 … up to ``max_concurrency`` (and ``max_num_seqs``)."""
    levels: list[int] = []
    speedups: list[float] = []
    outside: set[str] = set()
    c, cross = 1, None
    top = min(max_concurrency, base.max_num_seqs)
    while c <= top:
        s, spec, _ = speedup_at(base, cost, replace(shape, concurrency=c))
        levels.append(c)
        speedups.append(s)
        outside.update(spec.outside)
        if s <= 1.0:
            if len(levels) > 1:
                c0, s0 = levels[-2], speedups[-2]
                frac = (s0 - 1.0) / (s0 - s) if s0 != s else 0.0
                cross = 2 ** (math.log2(c0) + frac * (math.log2(c) - math.log2(c0)))
            break
        c *= 2
    return BreakEven(tuple(levels), tuple(speedups), cross, tuple(sorted(outside)))
