"""The step runner: each step warms up, measures, drains, and is summarized on its own."""

from __future__ import annotations

from infmon.clock import MonotonicClock
from infmon.config import Config
from infmon.load.driver import LoadDriver
from infmon.load.steps import StepCollector, StepSpec, plan_from_config, run_steps
from infmon.load.workload.words import RandomWords as Workload
from infmon.model.stats import SLO
from tests.unit.test_driver import FakeStreamClient


async def test_run_steps_reports_each_level() -> None:
    clock = MonotonicClock()
    sunk: list = []
    ticks: list = []
    seen: list = []
    collector = StepCollector(sunk.append)
    driver = LoadDriver(FakeStreamClient(latency_s=0.02), Workload(), collector, clock)
    plan = [
        StepSpec(concurrency=1, duration_s=0.3, warmup_s=0.1),
        StepSpec(concurrency=4, duration_s=0.3, warmup_s=0.1),
    ]
    stats = await run_steps(
        driver,
        collector,
        plan,
        clock=clock,
        slo=SLO(e2el_s=1.0),
        on_step=lambda i, spec, s: seen.append((i, spec.concurrency)),
        on_tick=ticks.append,
        tick_s=0.1,
    )
    await driver.stop()
    assert seen == [(0, 1), (1, 4)]
    assert [s.concurrency for s in stats] == [1, 4]
    for s, c in zip(stats, (1, 4), strict=True):
        assert s.completed > 0 and s.failed == 0 and s.warmup_excluded >= c
        assert abs(s.achieved_concurrency - c) < 0.5
        assert s.duration_s >= 0.3 and s.slo_attainment == 1.0
    assert stats[1].request_throughput_req_s > 2.5 * stats[0].request_throughput_req_s
    assert {t.phase for t in ticks} >= {"warmup", "measure"}
    assert len(sunk) == sum(s.completed + s.warmup_excluded for s in stats)


async def test_step_ends_early_at_request_limit() -> None:
    clock = MonotonicClock()
    collector = StepCollector()
    driver = LoadDriver(FakeStreamClient(latency_s=0.01), Workload(), collector, clock)
    plan = [StepSpec(concurrency=2, duration_s=30.0, warmup_s=0.0, max_requests=10)]
    t0 = clock.now()
    stats = await run_steps(driver, collector, plan, clock=clock)
    await driver.stop()
    assert clock.now() - t0 < 2.0
    assert (
        stats[0].completed == 10
    )  # exactly N sent (vllm bench serve's --num-prompts), all finished


async def test_request_limit_is_exact_in_open_loop_and_per_step() -> None:
    """A burst of arrivals cannot overshoot the limit, warm-up requests do not count, and the
    next step gets its own N."""
    clock = MonotonicClock()
    collector = StepCollector()
    driver = LoadDriver(FakeStreamClient(latency_s=0.05), Workload(), collector, clock)
    plan = [
        StepSpec(rate=400.0, max_concurrency=64, duration_s=30.0, warmup_s=0.05, max_requests=7),
        StepSpec(concurrency=3, duration_s=30.0, warmup_s=0.0, max_requests=5),
    ]
    stats = await run_steps(driver, collector, plan, clock=clock)
    await driver.stop()
    assert [s.completed for s in stats] == [7, 5]
    assert stats[0].warmup_excluded > 0


def test_plan_from_config() -> None:
    plan = plan_from_config(Config(concurrency=(1, 8), step_duration_s=10.0))
    assert [(p.concurrency, p.duration_s, p.warmup_s) for p in plan] == [
        (1, 10.0, 1.0),
        (8, 10.0, 1.0),
    ]
    plan = plan_from_config(
        Config(rate=(0.5, 2.0), arrival="gamma", max_concurrency=9, warmup_s=0.0)
    )
    assert [(p.rate, p.arrival, p.max_concurrency, p.warmup_s) for p in plan] == [
        (0.5, "gamma", 9, 0.0),
        (2.0, "gamma", 9, 0.0),
    ]
    assert [p.concurrency for p in plan_from_config(Config())] == [1]
