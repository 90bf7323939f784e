"""A plan fitted to a total time (``infmon demo --headless --duration S``): each step's
measured time is set as it starts, from the time left and what the earlier steps cost beyond
their measured time (warm-up, the drain of their last requests, the edge scrapes)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import overload

from infmon.clock import Clock
from infmon.engine.runner import StepSpec

MIN_MEASURE_S = 2.0
"""A step measures at least this long, whatever the budget says (the run then overruns)."""
RESERVE_S = 1.0
"""Kept back for what follows the last step (the reports)."""
FIRST_EXTRA_SHARE = 0.25
"""Before any step ran, its cost beyond the measured time is guessed as this share of the
step's time (a simulator's c=1 request lasts about 2 s of an 8 s share)."""


class BudgetedPlan(Sequence[StepSpec]):
    """``plan``'s steps, each measured for what the time left allows by ``deadline_s`` (on
    ``clock``). Indexing gives the steps as planned; iterating (as the runner does, one step
    at a time) gives them fitted."""

    def __init__(self, plan: Sequence[StepSpec], deadline_s: float, clock: Clock) -> None:
        self.plan, self.deadline_s, self.clock = list(plan), deadline_s, clock
        self.fitted: list[StepSpec] = []
        """The steps as they were run."""

    def __len__(self) -> int:
        return len(self.plan)

    @overload
    def __getitem__(self, i: int) -> StepSpec: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[StepSpec]: ...
    def __getitem__(self, i: int | slice) -> StepSpec | Sequence[StepSpec]:
        return self.plan[i]

    def __iter__(self) -> Iterator[StepSpec]:
        extra, started = None, None
        for i, base in enumerate(self.plan):
            now = self.clock.now()
            if started is not None:  # what the step before cost beyond its measured time
                seen = now - started - self.fitted[-1].duration_s
                extra = seen if extra is None else max(extra, seen)
            left = self.deadline_s - RESERVE_S - now
            share = left / (len(self.plan) - i)
            cost = FIRST_EXTRA_SHARE * share if extra is None else extra
            spec = replace(base, duration_s=round(max(MIN_MEASURE_S, share - cost), 2))
            self.fitted.append(spec)
            started = now
            yield spec
