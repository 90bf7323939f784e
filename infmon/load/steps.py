"""The step runner: hold each load level for its warm-up plus measured window, then summarize.

A step: set the level, run ``warmup_s`` (requests sent then are flagged and excluded), measure
for ``duration_s`` (or until ``max_requests`` measured requests were sent, as ``vllm bench serve
--num-prompts`` sends exactly that many), then pause and let the step's in-flight requests
finish, so each step's records are complete and no request straddles two levels. The step's
duration runs from the end of warm-up to the later of the window's end and its last request's
end (vLLM's benchmark duration). Used by ``infmon bench`` and the sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from infmon.clock import Clock
from infmon.config import Config
from infmon.load.driver import ArrivalSource, LoadDriver
from infmon.model.records import RequestRecord
from infmon.model.stats import SLO, StepStats, summarize


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One load level: closed loop (``concurrency``) or open loop (``rate``)."""

    concurrency: int | None = None
    rate: float | None = None
    duration_s: float = 20.0
    warmup_s: float = 2.0
    max_requests: int | None = None
    max_concurrency: int = 256
    arrival: str = "poisson"
    replay: ArrivalSource | None = None
    """A trace or schedule: send at its times until its arrivals are over."""

    @property
    def label(self) -> str:
        if self.replay is not None:
            return "replay"
        return f"c={self.concurrency}" if self.concurrency is not None else f"rate={self.rate:g}/s"


@dataclass(frozen=True, slots=True)
class StepProgress:
    """A heartbeat while a step runs (for progress lines)."""

    index: int
    total: int
    spec: StepSpec
    phase: str
    """"warmup", "measure" or "drain"."""
    elapsed_s: float
    finished: int
    failed: int


def plan_from_config(config: Config, replay: ArrivalSource | None = None) -> list[StepSpec]:
    """The steps a config asks for (a trace or schedule replay, else concurrency steps, else
    rate steps, else c=1)."""
    base = StepSpec(
        duration_s=config.step_duration_s,
        warmup_s=config.effective_warmup_s,
        max_requests=config.step_requests,
        max_concurrency=config.max_concurrency,
        arrival=config.arrival,
    )
    if replay is not None or config.trace or config.schedule:
        return [replace(base, warmup_s=config.warmup_s or 0.0, duration_s=math.inf, replay=replay)]
    if config.rate and not config.concurrency:
        return [replace(base, rate=r) for r in config.rate]
    return [replace(base, concurrency=c) for c in (config.concurrency or (1,))]


class StepCollector:
    """The driver's ``on_record``: keeps records by step and forwards each to the sinks."""

    def __init__(self, *sinks: Callable[[RequestRecord], None]) -> None:
        self.by_step: dict[int, list[RequestRecord]] = defaultdict(list)
        self.sinks = sinks

    def __call__(self, rec: RequestRecord) -> None:
        self.by_step[rec.step].append(rec)
        for sink in self.sinks:
            sink(rec)

    def counts(self, step: int) -> tuple[int, int]:
        """(measured finished, measured failed) of a step so far."""
        recs = [r for r in self.by_step.get(step, ()) if not r.warmup]
        return len(recs), sum(1 for r in recs if not r.ok)


async def run_steps(
    driver: LoadDriver,
    collector: StepCollector,
    plan: Sequence[StepSpec],
    *,
    clock: Clock,
    slo: SLO | None = None,
    on_step: Callable[[int, StepSpec, StepStats], None] | None = None,
    on_tick: Callable[[StepProgress], None] | None = None,
    tick_s: float = 1.0,
    drain_timeout_s: float = 120.0,
) -> list[StepStats]:
    """Run every step in order; returns (and reports through ``on_step``) their statistics."""
    driver.start()
    results: list[StepStats] = []
    for index, spec in enumerate(plan):
        stats = await _run_one(
            driver, collector, spec, index, len(plan), clock, slo, on_tick, tick_s, drain_timeout_s
        )
        results.append(stats)
        if on_step is not None:
            on_step(index, spec, stats)
    return results


async def _run_one(
    driver: LoadDriver,
    collector: StepCollector,
    spec: StepSpec,
    index: int,
    total: int,
    clock: Clock,
    slo: SLO | None,
    on_tick: Callable[[StepProgress], None] | None,
    tick_s: float,
    drain_timeout_s: float,
) -> StepStats:
    step = driver.next_step(spec.warmup_s)
    replay_over = asyncio.Event()
    if spec.replay is not None:
        driver.set_arrivals(spec.replay, spec.max_concurrency, replay_over.set)
    elif spec.concurrency is not None:
        driver.set_concurrency(spec.concurrency)
    else:
        assert spec.rate is not None
        driver.set_rate(spec.rate, spec.max_concurrency, spec.arrival)
    driver.resume()
    t0 = clock.now()

    def tick(phase: str) -> None:
        if on_tick is not None:
            done, failed = collector.counts(step)
            on_tick(StepProgress(index, total, spec, phase, clock.now() - t0, done, failed))

    await _hold(clock, t0 + spec.warmup_s, tick_s, lambda: tick("warmup"), replay_over)
    w0, area0 = clock.now(), driver.inflight_area_s()
    limit_reached = replay_over if spec.replay is not None else asyncio.Event()
    if spec.max_requests is not None:
        driver.limit_sends(spec.max_requests, limit_reached.set)  # exactly N, then it pauses
    await _hold(clock, w0 + spec.duration_s, tick_s, lambda: tick("measure"), limit_reached)
    t_end = clock.now()
    achieved = (driver.inflight_area_s() - area0) / (t_end - w0) if t_end > w0 else math.nan
    lag = driver.loop_lag_p99_s(since_s=w0)
    driver.pause()
    tick("drain")
    await driver.wait_idle(drain_timeout_s)
    recs = collector.by_step.pop(step, [])
    ends = [r.end_s for r in recs if not r.warmup and not math.isnan(r.end_s)]
    duration = max([t_end, *ends]) - w0
    return summarize(
        recs,
        duration,
        slo,
        concurrency=spec.concurrency,
        rate=spec.rate,
        achieved_concurrency=achieved,
        loop_lag_p99_s=lag,
        send_lateness_s=driver.arrival_lateness_s(since_s=t0),
    )


async def _hold(
    clock: Clock,
    until_s: float,
    tick_s: float,
    tick: Callable[[], None],
    stop: asyncio.Event | None = None,
) -> None:
    """Wait until ``until_s`` on the injected clock, ticking; end early when ``stop`` is set."""
    stop = stop or asyncio.Event()
    next_tick = clock.now() + tick_s
    while (remaining := until_s - clock.now()) > 0 and not stop.is_set():
        wait_s = min(remaining, max(0.0, next_tick - clock.now()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
        if clock.now() >= next_tick:
            tick()
            next_tick += tick_s
