"""When the self-check calls a load thread starved: by the wait each time it got a CPU (how late
its timestamps were), not by the share of time it waited. Figures from runs beside the real vLLM
at c=4 and beside CPU hogs on one core (4 Dec; ``infmon.model.records.client_late``)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from infmon.load.selfcheck import thread_sched
from infmon.model.records.client_late import STARVED_WAIT_S, Starving, late_cause
from infmon.model.steps.gathering import Sched


def starving(share: float, each_s: float, span_s: float = 20.0) -> Starving:
    runq = share * span_s
    return Starving(runq, round(runq / each_s), span_s)


def test_many_short_waits_are_not_starvation_and_few_long_ones_are() -> None:
    # --load-priority high beside vLLM: 45% of the time, 0.45 ms a wake-up; TTFT +2.1 ms
    assert not starving(0.45, 0.00045).starved
    # plain normal beside vLLM: 1.9 ms a wake-up; TTFT +44 ms, TPOT 0.72 of the server's
    assert starving(0.90, 0.0019).starved
    # plain normal beside six hogs on one core: 33%, 5.1 ms
    assert starving(0.33, 0.0051).starved
    # a 3% share in 2 ms waits is still 2 ms late each time (the share rule let it pass)
    assert starving(0.03, 0.002).starved
    assert starving(0.5, STARVED_WAIT_S).starved and not starving(0.5, 0.9 * STARVED_WAIT_S).starved


def test_without_a_count_of_runs_the_share_decides() -> None:
    assert Starving(1.2, 0, 20.0).starved  # 6%
    assert not Starving(0.8, 0, 20.0).starved  # 4%
    assert not Starving(0.0, 0, 0.0).starved  # nothing measured


def test_the_cause_says_the_share_and_the_wait_each_time() -> None:
    sched = Sched()
    for _ in range(4):  # four 5 s windows
        sched.add(5.0, 0.2, 1.65, 330, "infmon-hog (pids 1, 2) 1.0 cores")
    cause = sched.cause()
    assert cause.starved
    assert "waited for a CPU 33% of the time, 5.0 ms each time it woke" in cause.text
    assert "infmon-hog (pids 1, 2)" in cause.text and "--load-priority high" in cause.text
    light = Sched()
    light.add(5.0, 0.2, 1.05, 5000, None)  # 21%, 0.21 ms
    assert not light.cause().starved
    assert late_cause(Starving(1.05, 5000, 5.0), 0.04, None).text == ""


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.path.exists("/proc/thread-self/schedstat"),
    reason="needs Linux schedstats",
)
def test_the_kernel_counts_each_time_the_thread_got_a_cpu() -> None:
    before = thread_sched()
    for _ in range(20):
        time.sleep(0.001)  # each sleep ends with the thread put back on a CPU
    after = thread_sched()
    assert before is not None and after is not None
    assert after[2] - before[2] >= 20
    assert after[1] >= before[1] and after[0] > before[0]
