"""Why a load client's timestamps were late, from its load thread's own account.

The load thread's run-queue wait (runnable, no CPU free: the kernel's ``schedstat``) and its
CPU time, each as a share of the measured time, tell two causes apart: CPU starvation by
other processes (a server on the same cores, another job), which only another core or host
cures, and infmon's own work on its loop, which more load workers cure. Pure: the shares
and the names of the top CPU users come from the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

STARVED_SHARE = 0.05
"""Run-queue wait above this share of the time: the load thread starved."""
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


def late_cause(runq_share: float, busy_share: float, cpu_users: str | None) -> LateCause:
    """The cause and the remedy (``NO_CAUSE`` when not measured or neither holds)."""
    if not math.isnan(runq_share) and runq_share >= STARVED_SHARE:
        who = f"; top CPU users: {cpu_users}" if cpu_users else ""
        return LateCause(
            True,
            f"CPU starvation by other processes: the load thread waited for a CPU "
            f"{100 * runq_share:.0f}% of the time{who}. Let infmon take real-time priority "
            "(root, CAP_SYS_NICE or `ulimit -r 1`; its load thread line says whether it had it "
            "and why not), give it a core of its own (taskset), or run it on another host",
        )
    if not math.isnan(busy_share) and busy_share >= BUSY_SHARE:
        return LateCause(
            False,
            f"infmon's own work: its load loop was busy {100 * busy_share:.0f}% of the time. "
            "Spread the load over --workers N (and not --in-process)",
        )
    return NO_CAUSE
