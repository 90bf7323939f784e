"""Steps held at one load level, as the live Session sees them: the knee view's points.

A step's output tokens/s counts the tokens *generated inside* its measured window (chunk times),
not the requests that happened to finish in it: a closed loop at high concurrency finishes few
requests early in a step, so completion counting would understate every new level. Tokens of a
request still in flight arrive with its record, so a step's figure is final ("settled") only once
the requests it overlapped have finished; the knee is judged on settled steps only.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from infmon.model.dashboard import Percentiles, Slo, StepPoint
from infmon.model.records import RequestRecord

NAN = math.nan
GOOD_SHARE = 0.9
"""A step meets the SLO when this share of its measured requests are good."""


@dataclass(slots=True)
class LiveStep:
    index: int
    mode: str
    level: float
    start_s: float
    end_s: float | None = None
    warmup_s: float = 0.0
    records: list[RequestRecord] = field(default_factory=list)
    tokens: float = 0.0
    """Output tokens generated inside [start + warmup, end)."""

    @property
    def measured_from_s(self) -> float:
        return self.start_s + self.warmup_s


def credit_tokens(steps: list[LiveStep], rec: RequestRecord) -> None:
    """Share a finished request's output tokens among the steps its chunks fell in."""
    times = rec.chunk_times_s
    if not rec.ok or not times:
        return
    per_chunk = rec.output_token_count / len(times)
    for step in reversed(steps):
        hi = step.end_s if step.end_s is not None else math.inf
        if hi < times[0]:
            break
        lo = step.measured_from_s
        if lo > times[-1]:
            continue
        step.tokens += (bisect_left(times, hi) - bisect_left(times, lo)) * per_chunk


def percentiles(values: list[float]) -> Percentiles:
    """p50/p90/p99 with numpy's linear interpolation (vLLM's definition); nan when empty."""
    arr = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if arr.size == 0:
        return Percentiles()
    p50, p90, p99 = np.percentile(arr, [50, 90, 99])
    return Percentiles(float(p50), float(p90), float(p99), int(arr.size))


def step_point(step: LiveStep, now: float, slo: Slo,
               meets: Callable[[RequestRecord, Slo], bool]) -> StepPoint:
    end = step.end_s if step.end_s is not None else now
    span = end - step.measured_from_s
    kept = [r for r in step.records if r.ok and r.sent_s >= step.measured_from_s]
    e2el = percentiles([r.e2el_s for r in kept])
    meets_slo = None
    if slo.is_set and kept:
        meets_slo = sum(1 for r in kept if meets(r, slo)) >= GOOD_SHARE * len(kept)
    longest = max((r.e2el_s for r in kept), default=NAN)
    settled = step.end_s is not None and not math.isnan(longest) and now - step.end_s >= longest
    return StepPoint(
        index=step.index, mode=step.mode, level=step.level, held_s=end - step.start_s,
        output_tokens_per_s=step.tokens / span if span > 0 and step.tokens > 0 else NAN,
        p90_e2el_s=e2el.p90_s, p90_ttft_s=percentiles([r.ttft_s for r in kept]).p90_s,
        completed=len(kept), meets_slo=meets_slo, settled=settled,
    )
