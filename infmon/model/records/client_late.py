"""Why a load client's timestamps were late, from its load thread's own account.

The load thread's run-queue wait (runnable, no CPU free: the kernel's ``schedstat``) and its
CPU time tell two causes apart: CPU starvation by other processes (a server on the same cores,
another job), which only priority, another core or another host cures, and infmon's own work on
its loop, which more load workers cure. Pure: the figures and the names of the top CPU users
come from the caller.

Starvation is judged by the wait each time the thread got a CPU (the kernel counts those too):
that is how late each timestamp taken after a wake-up was. The share of time spent waiting mixes
that lateness with how often the thread wakes. ``python bench/real_truth.py --clients
default,high,normal,vllm --levels 4 --threads`` beside the real vLLM (4 Dec, the server's own
histograms the arbiter): at ``--load-priority high`` the load thread waited 45% of the time but
0.45 ms each time, and added 2.1 ms to TTFT (TPOT 1.000 of the server's); at plain normal it
waited 1.9 ms each time and added 44 ms (TPOT 0.72); in real time 0.01 ms each time, +1.5 ms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STARVED_SHARE = 0.05
"""Run-queue wait above this share of the time: the load thread starved (the rule when the times
it got a CPU were not counted)."""
STARVED_WAIT_S = 0.001
"""A mean wait this long or longer each time the load thread got a CPU: it starved (its
timestamps a millisecond late on average, a tenth of a small model's TTFT here)."""
BUSY_SHARE = 0.5
"""CPU time above this share of the time: the load loop itself was busy."""


@dataclass(frozen=True, slots=True)
class LateCause:
    """Why timestamps were late: ``starved`` (other processes had the CPU: the timestamps are
    late whatever the loop's lag says), or infmon's own work; ``text`` says it and the remedy.
    ``bound``: the load workers left after a worker loss were saturated by the re-split share
    (``infmon.model.records.survivors``), said how ("": they were not); it stands beside the
    other causes: the step measured the client as much as the server."""

    starved: bool = False
    text: str = ""
    bound: str = ""


NO_CAUSE = LateCause()


@dataclass(frozen=True, slots=True)
class Starving:
    """A load thread's run-queue wait over ``span_s`` and the times it got a CPU (0: not
    counted)."""

    runq_s: float
    runs: int
    span_s: float

    @property
    def share(self) -> float:
        return self.runq_s / self.span_s if self.span_s > 0 else math.nan

    @property
    def per_run_s(self) -> float:
        return self.runq_s / self.runs if self.runs > 0 else math.nan

    @property
    def starved(self) -> bool:
        if self.runs > 0:
            return self.per_run_s >= STARVED_WAIT_S
        return self.share >= STARVED_SHARE  # nan: False

    def text(self) -> str:
        each = f", {1e3 * self.per_run_s:.1f} ms each time it woke" if self.runs > 0 else ""
        return f"waited for a CPU {100 * self.share:.0f}% of the time{each}"


@dataclass(slots=True)
class ThreadTime:
    """A load thread's account over the windows gathered: its CPU time, its run-queue wait and
    the times it got a CPU, over ``span_s`` of wall time."""

    cpu_s: float = 0.0
    runq_s: float = 0.0
    runs: int = 0
    span_s: float = 0.0

    def add(self, span_s: float, cpu_s: float, runq_s: float, runs: int) -> None:
        self.cpu_s += cpu_s
        self.runq_s += runq_s
        self.runs += runs
        self.span_s += span_s

    @property
    def starving(self) -> Starving:
        return Starving(self.runq_s, self.runs, self.span_s)

    @property
    def busy_share(self) -> float:
        """CPU time over wall time (NaN: no time gathered)."""
        return self.cpu_s / self.span_s if self.span_s > 0 else math.nan


def late_cause(starving: Starving, busy_share: float, cpu_users: str | None) -> LateCause:
    """The cause and the remedy (``NO_CAUSE`` when not measured or neither holds)."""
    if starving.starved:
        who = f"; top CPU users: {cpu_users}" if cpu_users else ""
        return LateCause(
            True,
            f"CPU starvation by other processes: the load thread {starving.text()}{who}. Let "
            "infmon take real-time priority (root, CAP_SYS_NICE or `ulimit -r 1`; its load "
            "thread line says whether it had it and why not) or --load-priority high, give it a "
            "core of its own (taskset), or run it on another host",
        )
    if not math.isnan(busy_share) and busy_share >= BUSY_SHARE:
        return LateCause(
            False,
            f"infmon's own work: its load loop was busy {100 * busy_share:.0f}% of the time. "
            "Spread the load over --workers N (and not --in-process)",
        )
    return NO_CAUSE
