"""The load worker's real-time priority (issue 25): taken where permitted, given up when the
worker's own load keeps its thread busy (real time would then take the CPU from a server on the
same cores instead of sharing it) or when a normal thread beside it starves while it runs on
time (real time starves the host's others there), and said each time. Each worker case runs in
a child process: the scheduling class is the thread's, and pytest's must not change."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from infmon.clock import FakeClock
from infmon.config import Config
from infmon.engine import protocol as p
from infmon.engine.controller import REALTIME_NEWS_S, LoadEngine
from infmon.load.runtime import (
    OWN_LATE_S,
    STARVED_WAIT_S,
    WakeCanary,
    realtime_harm,
    retry_after,
)
from tests.conftest import REPO
from tests.enginekit import random_words, scripted

SCRIPT = """
import asyncio, os, sys, threading, time
from infmon.engine import protocol as p
from infmon.engine.worker import WorkerCore

BUSY = sys.argv[1] == "busy"
STARVED = sys.argv[1] in ("starved", "passes")
got = []

class StarvedCanary:
    # a canary as it reads on a host whose kernel lets real time starve a normal thread: its
    # wake-up 6 s late while the loop keeps time (WakeCanary measures it: see its test)

    def start(self):
        pass

    def stop(self):
        pass

    readings = 0

    def waited(self):
        # "passes": the host starves a normal thread once, then no more
        StarvedCanary.readings += 1
        return 6.0 if sys.argv[1] == "starved" or StarvedCanary.readings == 1 else 0.0

class StarvedController:
    # infmon's controller as ControllerWatch reads it on such a host: runnable, no CPU for 4 s
    def starved_s(self):
        return 4.0

class Config:
    load_priority = sys.argv[2]
    realtime_again = sys.argv[3] == "again"  # False: infmon bench's one priority per run

def policy():
    return os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)

async def main():
    core = WorkerCore(got.append, own_process=True)
    if STARVED:
        core.canary_factory = StarvedCanary
        core.realtime_retry_s = 0.5 if sys.argv[1] == "passes" else None
    if sys.argv[1] == "controller":
        core.controller_watch = StarvedController
    said = core._load_thread(Config())
    if "real-time" not in said and "high fair share" not in said:
        print("SKIP", said)
        return
    assert policy() == (os.SCHED_OTHER if "high" in sys.argv[2:] else os.SCHED_RR), policy()
    print(said)
    end = time.perf_counter() + 2.6
    while time.perf_counter() < end:
        if BUSY:  # the load keeps the loop busy: 150 ms of work, a turn of the loop, again
            spin = time.perf_counter() + 0.15
            while time.perf_counter() < spin:
                pass
            await asyncio.sleep(0.01)
        else:
            await asyncio.sleep(0.05)
    notes = [m.text for m in got if isinstance(m, p.LoadThread)]
    retries = [m.retry_s for m in got if isinstance(m, p.LoadThread)]
    tid = threading.get_native_id()
    nice = os.getpriority(os.PRIO_PROCESS, tid)
    with open(f"/proc/self/task/{tid}/sched") as f:  # the kernel's own account of the thread
        slices = [ln.split(":")[1].strip() for ln in f if ln.startswith("se.slice")]
    with open("/proc/self/autogroup") as f:
        group = f.read().split()[-1]
    print("RR" if policy() == os.SCHED_RR else "OTHER", "nice", nice, "group", group, "slice", slices)
    print(notes, "retry_s", retries)

asyncio.run(main())
"""


def run(kind: str, priority: str = "realtime", again: bool = True) -> str:
    """The case's output: what the load thread line said, then its class, nice and scheduling
    group's nice, then the notes it sent. Its own session, as a load worker process is."""
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, kind, priority, "again" if again else "once"],
        start_new_session=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    if out.stdout.startswith("SKIP"):
        pytest.skip(f"real time is not permitted here: {out.stdout[5:].strip()}")
    return out.stdout.strip()


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("busy", "its load kept it busy"),  # then: real time would take that CPU from the server
        ("starved", "a normal thread beside it waited 6.0 s for a core while it ran on time"),
        (
            "controller",
            "infmon's own controller (the process that journals and shows the load) got no CPU "
            "for 4 s while it ran on time",
        ),
    ],
)
def test_a_real_time_load_thread_goes_back_to_normal_and_says_why(kind: str, why: str) -> None:
    """Busy: plain normal (nice 0). Starving the host: the top of the fair class, nice -20 for
    the thread and its process's scheduling group, so it still reads soon after a wake-up."""
    out = run(kind)
    assert "OTHER nice" in out, out
    if kind == "busy":
        assert "OTHER nice 0 group 0" in out, out
        assert f"normal priority since {why}" in out
        assert "real time would take that CPU from the server" in out
    else:
        assert "OTHER nice -20 group -20" in out, out
        assert f"high fair share (nice -20) since {why}" in out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_bench_run_keeps_the_high_fair_share_after_a_starvation() -> None:
    """``infmon bench`` (``realtime_again`` False): its steps measured beside one priority, the
    retake not kept waiting for real time (the message carries no retry)."""
    out = run("passes", again=False)
    assert "OTHER nice -20 group -20" in out, out
    assert "high fair share (nice -20) since a normal thread beside it waited 6.0 s" in out, out
    assert "for the rest of this run" in out, out
    assert out.endswith("retry_s [None]"), out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_high_fair_share_load_thread_is_nice_minus_20_and_its_group_too() -> None:
    out = run("light", "high")
    assert out.startswith("high fair share (nice -20"), out
    assert "and its scheduling group)" in out, out
    assert "OTHER nice -20 group -20" in out, out
    if "0.1 ms slices" in out:  # the kernel took the short slice (Linux 6.12+)
        assert "slice ['100000']" in out, out
    assert out.endswith("[] retry_s []"), out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_busy_high_fair_share_load_thread_goes_back_to_plain_normal() -> None:
    out = run("busy", "high")
    assert "OTHER nice 0 group 0" in out, out
    assert "slice ['100000']" not in out, out  # the kernel's default slice again
    assert "normal priority since its load kept it busy" in out, out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_light_real_time_load_thread_keeps_real_time() -> None:
    out = run("light")
    assert "RR nice 0 group 0" in out and out.endswith("[] retry_s []"), out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_starvation_that_passes_gives_the_load_thread_real_time_back_and_says_so() -> None:
    out = run("passes")
    assert "RR nice -20 group 0" in out, out  # the group weighs as others do again (the canary)
    assert "real time again in 0.5 s" in out
    assert "real-time again (SCHED_RR 1) after 0.5 s at high fair share (nice -20)" in out
    assert out.endswith("retry_s [0.5, None]")  # when it is due back, then that it is (bench's
    # --retake waits for it)


async def test_the_controller_knows_when_a_load_thread_is_due_back_in_real_time() -> None:
    clock = FakeClock(100.0)
    engine = LoadEngine(
        Config(url="http://scripted"), clock, on_records=lambda batch: None,
        client_factory=scripted(), workload_factory=random_words(),
    )  # fmt: skip
    assert engine.realtime_wait_s() == 0.0
    engine._receive(p.LoadThread(0, "normal priority since …; real time again in 30 s", 30.0))
    clock.advance(10.0)
    assert engine.realtime_wait_s() == pytest.approx(20.0)
    clock.advance(25.0)  # overdue: the worker's word is on its way
    assert engine.realtime_wait_s() == REALTIME_NEWS_S
    engine._receive(p.LoadThread(0, "real-time again (SCHED_RR 1) after 30 s …"))
    assert engine.realtime_wait_s() == 0.0


def test_real_time_is_tried_again_after_30_s_then_twice_as_long_up_to_10_minutes() -> None:
    waits, last = [], 0.0
    for _ in range(7):
        last = retry_after(last)
        waits.append(last)
    assert waits == [30, 60, 120, 240, 480, 600, 600]
    # real time that held 10 minutes before the next starvation: that one passed, start again
    assert retry_after(600, held_s=600) == 30
    assert retry_after(120, held_s=599) == 240


def test_real_time_is_given_up_for_a_starved_neighbour_only_when_the_load_thread_kept_time() -> (
    None
):
    starved = realtime_harm(0.1, STARVED_WAIT_S + 0.5, 0.01)
    assert (
        starved is not None
        and starved.retry
        and f"waited {STARVED_WAIT_S + 0.5:.1f} s for a core" in starved.text
    )
    # the host paused every thread (the load thread's own second came late too): not real time
    assert realtime_harm(0.1, STARVED_WAIT_S + 0.5, OWN_LATE_S + 0.5) is None
    # a busy host's slow wake-up is not starvation
    assert realtime_harm(0.1, STARVED_WAIT_S - 0.5, 0.01) is None
    busy = realtime_harm(0.8, 0.0, 0.0)  # a CPU-bound load stays CPU-bound: no retry
    assert busy is not None and not busy.retry and "busy 80% of a second" in busy.text


def test_the_wake_canary_reports_a_wait_while_it_lasts_and_once_it_ends() -> None:
    """The canary cannot run while this thread holds the GIL (a switch interval longer than the
    hold), as it cannot while the kernel gives it no core: ``waited`` reads the wait in progress
    from its last beat, then the finished one from its own note, then nothing."""
    canary = WakeCanary(every_s=0.05)
    canary.start()
    try:
        time.sleep(0.3)
        assert canary.waited() < 0.2
        interval = sys.getswitchinterval()
        sys.setswitchinterval(30.0)
        try:
            end = time.perf_counter() + 1.2
            while time.perf_counter() < end:
                pass
            during = canary.waited()
        finally:
            sys.setswitchinterval(interval)
        time.sleep(0.3)
        after = canary.waited()
        time.sleep(0.3)
        settled = canary.waited()
    finally:
        canary.stop()
    assert during >= 1.0, during
    assert after >= 1.0, after
    assert settled < 0.2, settled
