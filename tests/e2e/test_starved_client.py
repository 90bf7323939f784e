"""A load client starved of CPU on purpose says so, and names who took the CPU (issue 25).

CPU hogs (processes named ``infmon-hog``, each pinned to one core) share that core with
``infmon bench``, pinned there too; the simulator runs wherever the kernel puts it. The
load thread's run-queue wait (its ``/proc/thread-self/schedstat``) is then a real share of
the time, its timestamps are late, and the step's self-check line must say it is CPU
starvation by other processes, name the hogs, and say what to do.
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
sys.stdout.write("spinning\\n"); sys.stdout.flush()
while True:
    pass
"""
HOGS = 3


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/thread-self/schedstat").exists(),
    reason="needs Linux schedstats",
)
def test_a_starved_load_thread_names_the_process_that_took_its_cpu(
    sim_url: str, tmp_path: Path
) -> None:
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
    out = (run.stdout + run.stderr).splitlines()
    starts = [i for i, ln in enumerate(out) if "client self-check" in ln]
    assert starts, f"no self-check line:\n{run.stdout}\n{run.stderr}"
    more = itertools.takewhile(lambda ln: ln.startswith(" " * 8), out[starts[0] + 1 :])
    para = [out[starts[0]], *more]
    assert all(len(ln) <= 100 for ln in para), para  # wrapped to the table's width
    line = " ".join(ln.strip() for ln in para)
    print(f"\n{line}")
    assert "client timestamps are late" in line, line
    assert "CPU starvation by other processes" in line, line
    assert "infmon-hog (pid" in line, line
    assert "taskset" in line and "another host" in line, line
