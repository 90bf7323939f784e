"""A load client starved of CPU on purpose says so, and names who took the CPU; and with
real-time priority it is not starved at all (issue 25).

CPU hogs (processes named ``infmon-hog``, each pinned to one core, each its own scheduling group
at autogroup nice -5 where permitted) share that core with
``infmon bench``, pinned there too; the simulator runs wherever the kernel puts it. At normal
priority (``--load-priority normal``) the load thread's run-queue wait (its
``/proc/thread-self/schedstat``) is then a real share of the time, its timestamps are late,
and the step's self-check line must say it is CPU starvation by other processes, name the
hogs, and say what to do. By default the load worker takes real-time priority where the
user's rights allow (CI runs as root): the same hogs then cannot delay it.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd

pytestmark = pytest.mark.e2e

HOG = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, b"infmon-hog", 0, 0, 0)  # PR_SET_NAME: /proc/PID/stat's name
os.sched_setaffinity(0, {int(sys.argv[1])})
try:  # its scheduling group (its session's) weighs 3x a default one, where the user may say so
    with open("/proc/self/autogroup", "w") as f:
        f.write("-5")
except OSError:
    pass
sys.stdout.write("spinning\\n"); sys.stdout.flush()
while True:
    pass
"""
HOGS = 6


SCHEDSTATS = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/thread-self/schedstat").exists(),
    reason="needs Linux schedstats",
)


def bench_beside_hogs(sim_url: str, tmp_path: Path, *extra: str) -> list[str]:
    """``infmon bench`` at c=16 on one core that ``HOGS`` spinning processes share; its
    output lines."""
    core = max(os.sched_getaffinity(0))
    hogs = [
        subprocess.Popen(
            [sys.executable, "-c", HOG, str(core)],
            stdout=subprocess.PIPE,
            start_new_session=True,  # each its own scheduling group, as separate jobs are
        )
        for _ in range(HOGS)
    ]
    try:
        for hog in hogs:  # spinning on the core before the load starts
            assert hog.stdout is not None and hog.stdout.readline() == b"spinning\n"
        run = subprocess.run(
            infmon_cmd(
                "bench",
                sim_url,
                "--concurrency",
                "16",
                "--step-duration",
                "5",
                "--warmup",
                "0.5",
                "--output-tokens",
                "32",
                "--session-dir",
                str(tmp_path / "s"),
                *extra,
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=180,
            preexec_fn=lambda: os.sched_setaffinity(0, {core}),
        )
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert run.returncode == 0, run.stderr
    return (run.stdout + run.stderr).splitlines()


def self_check(out: list[str]) -> str | None:
    """The self-check paragraph, joined (None: the run printed none)."""
    starts = [i for i, ln in enumerate(out) if "client self-check" in ln]
    if not starts:
        return None
    more = itertools.takewhile(lambda ln: ln.startswith(" " * 8), out[starts[0] + 1 :])
    para = [out[starts[0]], *more]
    assert all(len(ln) <= 100 for ln in para), para  # wrapped to the table's width
    return " ".join(ln.strip() for ln in para)


@SCHEDSTATS
def test_a_starved_load_thread_names_the_process_that_took_its_cpu(
    sim_url: str, tmp_path: Path
) -> None:
    out = bench_beside_hogs(sim_url, tmp_path, "--load-priority", "normal")
    assert "load thread: normal priority (--load-priority normal)" in out
    line = self_check(out)
    assert line is not None, "no self-check line:\n" + "\n".join(out)
    print(f"\n{line}")
    assert "client timestamps are late" in line, line
    assert "CPU starvation by other processes" in line, line
    assert "infmon-hog (pid" in line, line
    assert "real-time priority" in line and "taskset" in line and "another host" in line, line


@SCHEDSTATS
def test_a_real_time_load_thread_is_not_starved_by_the_same_hogs(
    sim_url: str, tmp_path: Path
) -> None:
    out = bench_beside_hogs(sim_url, tmp_path)
    said = next(ln for ln in out if ln.startswith("load thread: "))
    if "real-time" not in said:
        pytest.skip(f"this user may not take real-time priority ({said})")
    line = self_check(out)
    print(f"\n{said}\n{line}")
    assert line is None or "CPU starvation" not in line, line
