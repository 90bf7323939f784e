"""A load worker watches infmon's own controller on its host (``ControllerWatch``): on this
project's VM a real-time load thread kept time while the monitor's threads waited on a run queue
for seconds with no CPU (6 Dec: 0.2 s of CPU in 11.9 s, a report asked for with `s` 12-28 s
late, once never), and the worker's own canary never saw it. The kernel's accounts
(``/proc/PID/task/*/schedstat``: CPU time, run-queue wait) are laid out here as the kernel writes
them, for each case the worker must tell apart."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from infmon.load.runtime import CONTROLLER_STARVED_S, ControllerWatch, realtime_harm

PID = 4242


class Proc:
    """A fake /proc holding one process's threads, whose accounts a test advances."""

    def __init__(self, root: Path, tids: tuple[int, ...] = (4242, 4243, 4250)) -> None:
        self.root, self.t = root, 100.0
        self.acct = {tid: [0, 0, 0] for tid in tids}  # ns on a CPU, ns runnable-waiting, runs
        self.write()

    def write(self) -> None:
        for tid, (cpu, wait, runs) in self.acct.items():
            d = self.root / str(PID) / "task" / str(tid)
            d.mkdir(parents=True, exist_ok=True)
            (d / "schedstat").write_text(f"{cpu} {wait} {runs}\n")

    def second(self, cpu: dict[int, float], wait: dict[int, float]) -> None:
        """One second passes: each thread ran ``cpu`` s and waited for a core ``wait`` s."""
        self.t += 1.0
        for tid, a in self.acct.items():
            a[0] += int(cpu.get(tid, 0.0) * 1e9)
            a[1] += int(wait.get(tid, 0.0) * 1e9)
            a[2] += 1
        self.write()

    def watch(self) -> ControllerWatch:
        return ControllerWatch(PID, proc=str(self.root), clock=lambda: self.t)


def readings(proc: Proc, watch: ControllerWatch, seconds: list[tuple[dict, dict]]) -> list[float]:
    out = [watch.starved_s()]
    for cpu, wait in seconds:
        proc.second(cpu, wait)
        out.append(watch.starved_s())
    return out


def test_a_controller_runnable_with_no_cpu_is_starved_for_as_long_as_it_lasts(
    tmp_path: Path,
) -> None:
    """As measured beside vLLM: the main thread runnable almost all the time, the process
    running a few ms a second at most (a slice now and then, 15 ms once); then it runs again."""
    proc = Proc(tmp_path)
    watch = proc.watch()
    starved = ({4242: 0.002, 4250: 0.001}, {4242: 0.97, 4243: 0.9})
    burst = ({4242: 0.015}, {4242: 0.95})
    ran = ({4242: 0.3, 4243: 0.05}, {4242: 0.2})
    got = readings(proc, watch, [starved, starved, burst, starved, starved, ran, starved])
    assert got == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 1.0]
    assert got[3] == CONTROLLER_STARVED_S  # the bar: the load thread goes back to normal
    harm = realtime_harm(0.05, 0.0, 0.01, got[3])
    assert harm is not None and harm.retry
    assert (
        "infmon's own controller (the process that journals and shows the load) got no CPU for 3 s"
        in harm.text
    )
    assert realtime_harm(0.05, 0.0, 0.01, got[2]) is None  # 2 s: not yet
    # the load thread's own second came late too: the host paused everything, not real time
    assert realtime_harm(0.05, 0.0, 0.9, got[5]) is None


def test_a_controller_with_its_fair_share_of_a_busy_host_is_not_starved(tmp_path: Path) -> None:
    """Busy and waiting much of the time, yet running: a shared host, not real time's harm; down
    to the ~5% of a core a fair scheduler gives it beside six spinners weighing 3x each."""
    proc = Proc(tmp_path)
    watch = proc.watch()
    busy = ({4242: 0.25, 4243: 0.05}, {4242: 0.7, 4243: 0.2})
    assert max(readings(proc, watch, [busy] * 8)) == 0.0
    crowded = ({4242: 0.05}, {4242: 0.94})
    assert max(readings(proc, watch, [crowded] * 8)) == 0.0


def test_a_controller_blocked_on_its_own_work_or_idle_is_not_starved(tmp_path: Path) -> None:
    """Asleep (on a lock, a disk, the terminal) a thread is not runnable: no wait accrues."""
    proc = Proc(tmp_path)
    watch = proc.watch()
    idle = ({}, {})
    assert max(readings(proc, watch, [idle] * 6)) == 0.0


def test_a_controller_that_is_gone_or_unaccounted_reads_zero(tmp_path: Path) -> None:
    proc = Proc(tmp_path)
    watch = proc.watch()
    starved = ({4242: 0.0}, {4242: 1.0})
    assert readings(proc, watch, [starved] * 4)[-1] == 4.0
    shutil.rmtree(tmp_path / str(PID))
    proc.t += 1.0
    assert watch.starved_s() == 0.0
    assert ControllerWatch(PID, proc=str(tmp_path / "nowhere")).starved_s() == 0.0


def test_threads_that_come_and_go_are_read_from_when_they_appear(tmp_path: Path) -> None:
    """The report writer starts a thread while the controller starves: its wait counts from its
    first reading, its CPU before that does not."""
    proc = Proc(tmp_path, tids=(4242,))
    watch = proc.watch()
    starved = ({4242: 0.0}, {4242: 1.0})
    assert readings(proc, watch, [starved, starved]) == [0.0, 1.0, 2.0]
    proc.acct[4260] = [int(5e9), 0, 3]  # a new thread, 5 s of CPU in its past
    proc.second({}, {4242: 1.0, 4260: 1.0})
    assert watch.starved_s() == 3.0


def test_the_kernels_own_accounts_of_a_running_and_a_sleeping_process() -> None:
    """On this Linux: this test's process, running, and a child asleep are neither starved."""
    if not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"):
        return  # no schedstats here: ControllerWatch reads 0 (tested above)
    me = ControllerWatch(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        other = ControllerWatch(child.pid)
        seen = []
        for _ in range(4):
            end = time.monotonic() + 0.3
            while time.monotonic() < end:  # run, so the kernel accounts CPU time to us
                pass
            seen.append((me.starved_s(), other.starved_s()))
        assert seen == [(0.0, 0.0)] * 4, seen
    finally:
        child.kill()
        child.wait()
