"""The headless demo's plan fitted to its duration (``commands.budget``): each step's measured
time is what the time left allows, once the steps before showed what a step costs beyond it."""

from __future__ import annotations

from infmon.clock import FakeClock
from infmon.commands.budget import MIN_MEASURE_S, RESERVE_S, BudgetedPlan
from infmon.engine.runner import StepSpec


def run(plan: BudgetedPlan, clock: FakeClock, extra_s: list[float]) -> None:
    """Run it as the runner does: each step lasts its measured time plus its own extra."""
    for spec, extra in zip(plan, extra_s, strict=True):
        clock.advance(spec.duration_s + extra)


def test_the_steps_share_the_time_left_and_learn_what_a_step_costs() -> None:
    clock = FakeClock(100.0)
    nominal = [StepSpec(concurrency=c, duration_s=7.5, warmup_s=0.75) for c in (1, 4, 16, 64)]
    plan = BudgetedPlan(nominal, deadline_s=100.0 + 30.0, clock=clock)
    assert len(plan) == 4 and plan[3].concurrency == 64 and plan[0].duration_s == 7.5
    run(plan, clock, [3.0, 3.0, 3.2, 3.4])  # warm-up and drain, growing with the level
    assert [s.concurrency for s in plan.fitted] == [1, 4, 16, 64]
    assert clock.now() - 100.0 <= 30.0 - RESERVE_S + 0.4  # over only by the last drain's growth
    assert all(s.duration_s >= MIN_MEASURE_S for s in plan.fitted)


def test_a_budget_too_small_still_measures_each_step() -> None:
    clock = FakeClock(0.0)
    plan = BudgetedPlan([StepSpec(concurrency=c) for c in (1, 2)], deadline_s=3.0, clock=clock)
    run(plan, clock, [1.0, 1.0])
    assert [s.duration_s for s in plan.fitted] == [MIN_MEASURE_S, MIN_MEASURE_S]
