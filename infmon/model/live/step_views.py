"""The step views the panes show: one ``StepPoint`` per step with the knee rule's own reading
of it (the point it counts at each level, the growth per doubling to it), the baseline
compared at the same level, the step boundaries on the over-time series, and the closing
summary printed when the monitor quits. Pure functions over the ledger's results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from infmon.model.base.loghist import LogHistogram
from infmon.model.live.dashboard import BaselineStep, LatencyView, Percentiles, StepPoint
from infmon.model.live.series import SampleSeries
from infmon.model.live.windows import LiveWindows
from infmon.model.records.measures import SLO
from infmon.model.steps.knee import Knee, Withdrawn, growth_per_doubling
from infmon.model.steps.result import StepResult
from infmon.model.steps.slo_verdict import slo_verdict
from infmon.model.steps.span import CLOSED, RATE

NAN = math.nan


def percentiles(h: LogHistogram) -> Percentiles:
    if h.count == 0:
        return Percentiles()
    p50, p90, p99 = h.quantiles((0.5, 0.9, 0.99))
    return Percentiles(p50, p90, p99, h.count)


def step_point(r: StepResult, now: float) -> StepPoint:
    s = r.stats
    return StepPoint(
        index=r.index,
        mode=r.span.level.mode,
        level=r.span.level.value,
        held_s=r.span.held_s(now),
        output_tokens_per_s=s.output_throughput_tok_s,
        p90_e2el_s=s.e2el.p90,
        p90_ttft_s=s.ttft.p90,
        completed=s.completed,
        slo_attainment=s.slo_attainment,
        settled=r.settled,
        eligible=r.eligible,
        revisit_of=r.span.revisit_of,
        origin=r.span.origin,
    )


def knee_points(results: Sequence[StepResult], now: float) -> tuple[StepPoint, ...]:
    """Every closed-loop and rate step, in order. The knee rule counts one closed-loop step
    per level (the first eligible one, ``counted``); each counted step carries the throughput
    growth per doubling from the counted level below it, as the rule reads it. A rate step is
    a row of its own (``2/s``), never in the knee."""
    points = [
        step_point(r, now)
        for r in results
        if r.span.level.mode in (CLOSED, RATE) and r.span.held_s(now) > 0  # set while paused
    ]
    counted: dict[float, StepPoint] = {}
    for p in points:
        if p.mode == CLOSED and p.eligible and p.level not in counted:
            counted[p.level] = p
    growth: dict[int, float] = {}
    below: StepPoint | None = None
    for p in sorted(counted.values(), key=lambda p: p.level):
        if below is not None:
            growth[p.index] = growth_per_doubling(
                below.level, below.output_tokens_per_s, p.level, p.output_tokens_per_s
            )
        below = p
    keep = {p.index for p in counted.values()}
    return tuple(_with(p, counted=p.index in keep, growth=growth.get(p.index, NAN)) for p in points)


def _with(p: StepPoint, *, counted: bool, growth: float) -> StepPoint:
    return replace(p, counted=counted, growth_per_doubling=growth)


def baseline_view(
    base: StepResult | None, current: StepResult | None, now: float
) -> BaselineStep | None:
    """The baseline step against the running one: a change only at the same level (another
    level's throughput is not a regression), otherwise where the baseline is."""
    if base is None:
        return None
    level = base.span.level
    same = current is not None and current.span.level == level and current.index != base.index
    tok = base.stats.output_throughput_tok_s
    delta = NAN
    if same and current is not None and tok > 0:
        cur = current.stats.output_throughput_tok_s
        delta = cur / tok - 1 if not math.isnan(cur) else NAN
    return BaselineStep(
        step=base.index,
        level_label=level.label,
        output_tokens_per_s=tok,
        same_level=same,
        delta_fraction=delta,
    )


@dataclass(frozen=True, slots=True)
class Closing:
    """What the monitor says on stdout when it quits: the session in one paragraph."""

    elapsed_s: float
    steps: int
    peak_output_tokens_per_s: float
    peak_level: str | None
    knee: Knee | None
    slo_limit: int | None
    succeeded: int
    failed: int
    cancelled: int
    slo_set: bool
    slo_text: str = ""
    """The SLO verdict: ``c=32``, ``≥ 64, not reached``, ``none met``."""
    withdrawn: Withdrawn | None = None
    """A knee shown during the session that the figures no longer hold."""

    @property
    def requests(self) -> int:
        return self.succeeded + self.failed + self.cancelled


def closing(
    results: Sequence[StepResult],
    knee: Knee | None,
    slo_limit: int | None,
    counts: tuple[int, int, int],
    elapsed_s: float,
    slo_set: bool,
    withdrawn: Withdrawn | None = None,
) -> Closing:
    """The peak is the best eligible step (a step too short to judge is not a peak)."""
    judged = [r for r in results if r.eligible and not math.isnan(r.stats.output_throughput_tok_s)]
    best = max(judged, key=lambda r: r.stats.output_throughput_tok_s, default=None)
    return Closing(
        elapsed_s=elapsed_s,
        steps=len(results),
        peak_output_tokens_per_s=best.stats.output_throughput_tok_s if best else NAN,
        peak_level=best.span.level.label if best else None,
        knee=knee,
        slo_limit=slo_limit,
        succeeded=counts[0],
        failed=counts[1],
        cancelled=counts[2],
        slo_set=slo_set,
        slo_text=slo_verdict([r for r in results if r.span.level.mode == CLOSED], slo_set).text(),
        withdrawn=withdrawn,
    )


def closing_text(c: Closing) -> str:
    """``infmon: 2 min 5 s, 11 steps, 5,210 requests (0 failed, 256 cancelled). Peak 5,479
    tok/s at c=512; knee c=256 (running capped at 256 while 245 wait); SLO limit c=128.``"""
    minutes, seconds = divmod(round(c.elapsed_s), 60)
    took = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    lead = (
        f"infmon: {took}, {c.steps} step{'s' if c.steps != 1 else ''}, {c.requests:,} requests"
        f" ({c.failed:,} failed, {c.cancelled:,} cancelled)."
    )
    if math.isnan(c.peak_output_tokens_per_s):
        return f"{lead} No step was held long enough to judge."
    peak = f"Peak {c.peak_output_tokens_per_s:,.0f} tok/s at {c.peak_level}"
    if c.knee is None:
        knee = "no knee yet (throughput still growing)"
    else:
        knee = f"knee {c.knee.label}" + (f" ({c.knee.reason})" if c.knee.reason else "")
    if c.withdrawn is not None:  # shown on screen earlier: the summary says where it went
        knee += f"; {c.withdrawn.text}"
    if not c.slo_set:
        slo = "no SLO set"
    else:
        slo = f"SLO limit {c.slo_text or ('c=' + str(c.slo_limit) if c.slo_limit else 'none met')}"
    return f"{lead} {peak}; {knee}; {slo}."


def latency_view(
    windows: LiveWindows, span_s: float, slo: SLO, series: SampleSeries, now: float
) -> LatencyView:
    """The latency pane: p50/p90/p99 of the requests finished in the last ``span_s`` (the
    workers' histograms), the SLO verdicts on p90, the p90 series."""
    ttft, tpot, itl, e2el = (
        percentiles(windows.histogram(now, span_s, name))
        for name in ("ttft", "tpot", "itl", "e2el")
    )
    return LatencyView(
        ttft=ttft,
        tpot=tpot,
        itl=itl,
        e2el=e2el,
        slo=slo,
        ttft_p90_series=series["ttft"],
        e2el_p90_series=series["e2el"],
        tpot_p90_series=series["tpot"],
        itl_p90_series=series["itl"],
        step_marks=series.step_marks(),
        ttft_meets_slo=_within(ttft.p90_s, slo.ttft_s),
        tpot_meets_slo=_within(tpot.p90_s, slo.tpot_s),
        e2el_meets_slo=_within(e2el.p90_s, slo.e2el_s),
    )


def _within(p90_s: float, slo_s: float | None) -> bool | None:
    if slo_s is None or math.isnan(p90_s):
        return None
    return p90_s <= slo_s
