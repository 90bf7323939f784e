"""Did the load workers left after a worker loss carry the share they were given?

When a worker is lost the level is re-split over the others (``infmon.engine.controller``):
each survivor now sends more. If that saturates them, the step measures the client as much as
the server, and its figures must not be read as the server's (nor compared against noise). The
survivors' own self-check says so, window by window: their loop lag (late timestamps), their
load thread's CPU time (near one core: nothing left for more work) and its run-queue wait (no
CPU free). From the first loss on, every step's windows measured after it are gathered per
worker; at the step's end ``verdict`` says, when any survivor was saturated, what showed it
(``LateCause.bound``). Pure: windows and losses come from the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infmon.model.base.loghist import LogHistogram
from infmon.model.records.client_late import ThreadTime
from infmon.model.records.stats import CLIENT_LAG_LIMIT_S

SATURATED_CPU_SHARE = 0.85
"""A surviving worker whose load thread was busy this share of the time or more (near one
core: a worker's loop runs on one) was saturated."""


@dataclass(frozen=True, slots=True)
class LossMark:
    """A worker loss as the check needs it: when, which worker, how many were left."""

    t: float
    worker_id: int
    survivors: int


@dataclass(slots=True)
class _Step:
    loss: LossMark
    workers: dict[int, ThreadTime] = field(default_factory=dict)
    lag: LogHistogram = field(default_factory=LogHistogram)


class SurvivorCheck:
    """See the module docstring."""

    def __init__(self) -> None:
        self.losses: list[LossMark] = []
        self._steps: dict[int, _Step] = {}

    @property
    def active(self) -> bool:
        """A worker has been lost: windows are worth gathering."""
        return bool(self.losses)

    def lost(self, mark: LossMark) -> None:
        self.losses.append(mark)

    def window(
        self,
        step: int | None,
        worker: int,
        t0: float,
        t1: float,
        lag: LogHistogram | None = None,
        cpu_s: float = 0.0,
        runq_s: float = 0.0,
        runs: int = 0,
    ) -> None:
        """A survivor's window ``[t0, t1)`` measured in ``step`` (None: in no step's
        measured time); only windows whose middle came after the last loss count."""
        if step is None or not self.losses or t1 <= t0:
            return
        last = self.losses[-1]
        if (t0 + t1) / 2 < last.t or worker in {m.worker_id for m in self.losses}:
            return
        acc = self._steps.get(step)
        if acc is None or acc.loss is not last:
            acc = self._steps[step] = _Step(last)
        acc.workers.setdefault(worker, ThreadTime()).add(t1 - t0, cpu_s, runq_s, runs)
        if lag is not None:
            acc.lag.merge(lag)

    def verdict(self, step: int) -> str:
        """The step's verdict (once: its windows are let go): how the survivors were saturated
        after the loss, or "" when they were not."""
        acc = self._steps.pop(step, None)
        if acc is None or not acc.workers:
            return ""
        shares = [s for s in acc.workers.values() if s.span_s > 0]
        cpu = max((s.busy_share for s in shares), default=math.nan)
        starved = [x for x in (s.starving for s in shares) if x.starved]
        lag = acc.lag.quantile(0.99) if acc.lag.count else math.nan
        shown = []
        if lag > CLIENT_LAG_LIMIT_S:
            shown.append(f"loop lag p99 {lag * 1e3:,.0f} ms")
        if cpu >= SATURATED_CPU_SHARE:
            shown.append(f"a load thread busy {100 * cpu:.0f}% of a core")
        if starved:
            shown.append("a load thread " + max(starved, key=lambda x: x.share).text())
        if not shown:
            return ""
        n = len(acc.workers)
        return (
            f"after worker {acc.loss.worker_id} was lost the {n} surviving load "
            f"worker{'s' * (n != 1)} took its share and saturated ({'; '.join(shown)}): "
            "the step measured the client as much as the server. Rerun with more --workers "
            "(with Ray, --ray-restart replaces a lost actor)"
        )
