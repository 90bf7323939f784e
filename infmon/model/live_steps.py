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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infmon.model.dashboard import Percentiles, StepPoint
from infmon.model.knee import find_knee, slo_max_concurrency
from infmon.model.records import ErrorKind, RequestRecord
from infmon.model.stats import SLO, Distribution, meets_slo

NAN = math.nan


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


def percentiles(values: Iterable[float]) -> Percentiles:
    """p50/p90/p99 by the bench's ``Distribution`` (numpy's linear interpolation, vLLM's
    definition); nan when empty."""
    d = Distribution.of(values if isinstance(values, np.ndarray) else list(values))
    return Percentiles(d.p50, d.p90, d.p99, d.count)


def step_point(step: LiveStep, now: float, slo: SLO) -> StepPoint:
    end = step.end_s if step.end_s is not None else now
    span = end - step.measured_from_s
    measured = [
        r
        for r in step.records
        if r.sent_s >= step.measured_from_s and r.error_kind != ErrorKind.CANCELLED
    ]
    kept = [r for r in measured if r.ok]
    e2el = percentiles(r.e2el_s for r in kept)
    attainment = NAN
    if not slo.empty and measured:
        attainment = sum(1 for r in kept if meets_slo(r, slo)) / len(measured)
    longest = max((r.e2el_s for r in kept), default=NAN)
    settled = step.end_s is not None and not math.isnan(longest) and now - step.end_s >= longest
    return StepPoint(
        index=step.index,
        mode=step.mode,
        level=step.level,
        held_s=end - step.start_s,
        output_tokens_per_s=step.tokens / span if span > 0 and step.tokens > 0 else NAN,
        p50_e2el_s=e2el.p50_s,
        p90_e2el_s=e2el.p90_s,
        p90_ttft_s=percentiles(r.ttft_s for r in kept).p90_s,
        completed=len(kept),
        slo_attainment=attainment,
        settled=settled,
    )


def _latest_per_level(points: Iterable[StepPoint]) -> list[dict[str, Any]]:
    """Closed-loop steps as bench steps, the latest one at each level (a level held twice counts
    once, as a sweep would have measured it)."""
    latest = {p.level: p for p in points if p.mode == "closed"}
    return [p.to_dict() for p in latest.values()]


def knee_of(points: Sequence[StepPoint]) -> dict[str, Any] | None:
    """The knee by the bench's rule (``infmon.model.knee.find_knee``), on settled steps only:
    the screen, the sweep and the report call the same knee."""
    return find_knee(_latest_per_level(p for p in points if p.settled))


def slo_limit_of(points: Sequence[StepPoint]) -> int | None:
    """The bench's SLO limit (``slo_max_concurrency``) over the steps judged so far (a step
    with no measured request yet, or no SLO, is skipped)."""
    return slo_max_concurrency(
        _latest_per_level(p for p in points if not math.isnan(p.slo_attainment))
    )
