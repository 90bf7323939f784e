"""``CpuUsers``: who used the machine's CPUs between the two last readings of ``/proc``, read
from the kernel's real accounts of real processes.

CI once printed a starved load thread's top CPU users as "pytest-xdist 0.2 cores, python 0.1
cores" beside six spinning hogs: the hogs began between the controller's two readings (its
sampling thread starved with the rest of it), and a process unseen at the first reading was
left out. It began after that reading, so all its CPU time is the interval's."""

from __future__ import annotations

import subprocess
import sys
import time

from infmon.clock import MonotonicClock
from infmon.load.selfcheck import CpuUsers

SPIN = """
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[2].encode(), 0, 0, 0)  # PR_SET_NAME: its /proc name
end = time.process_time() + float(sys.argv[1])
while time.process_time() < end:
    pass
sys.stdout.write("spun\\n"); sys.stdout.flush()
time.sleep(60)
"""


def spinner(cpu_s: float, name: str) -> subprocess.Popen[bytes]:
    """A process named ``name`` that uses ``cpu_s`` of CPU, says so, then sleeps (it stays in
    /proc). Each test names its own: under ``-n 2`` the other test's may spin meanwhile."""
    proc = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu_s), name], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"spun\n"
    return proc


def test_a_process_that_began_between_the_readings_is_named_with_its_cpu() -> None:
    users = CpuUsers(MonotonicClock())
    users.sample()
    t0 = time.monotonic()
    proc = spinner(0.5, "infmon-spin-new")
    try:
        users.sample()
        interval = time.monotonic() - t0
        top = {u.name: u for u in users.top(5)}
        assert "infmon-spin-new" in top, [u.text() for u in top.values()]
        spin = top["infmon-spin-new"]
        assert spin.pids == (proc.pid,)
        # 0.5 s of its own CPU (plus its interpreter's start) over the interval, in ticks
        assert 0.45 / interval <= spin.cores <= (0.5 + 0.5) / interval + 0.02
    finally:
        proc.kill()
        proc.wait()


def test_a_process_seen_at_both_readings_counts_only_the_time_between() -> None:
    users = CpuUsers(MonotonicClock())
    # its 0.4 s of CPU, all spent before the first reading, are not the interval's
    proc = spinner(0.4, "infmon-spin-old")
    try:
        users.sample()
        time.sleep(0.3)
        users.sample()
        assert "infmon-spin-old" not in {u.name for u in users.top(10)}
    finally:
        proc.kill()
        proc.wait()
