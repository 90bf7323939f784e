"""The load worker's real-time priority (issue 25): taken where permitted, given up when the
worker's own load keeps its thread busy (real time would then take the CPU from a server on the
same cores instead of sharing it), and said each time. Each case runs in a child process: the
scheduling class is the thread's, and pytest's must not change."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCRIPT = """
import asyncio, os, sys, time
from infmon.engine import protocol as p
from infmon.engine.worker import WorkerCore

BUSY = sys.argv[1] == "busy"
got = []

class Config:
    load_priority = "realtime"

def policy():
    return os.sched_getscheduler(0) & ~getattr(os, "SCHED_RESET_ON_FORK", 0)

async def main():
    core = WorkerCore(got.append, own_process=True)
    said = core._load_thread(Config())
    if "real-time" not in said:
        print("SKIP", said)
        return
    assert policy() == os.SCHED_RR, policy()
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
    print("RR" if policy() == os.SCHED_RR else "OTHER", notes)

asyncio.run(main())
"""


def run(kind: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, kind],
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
def test_a_busy_real_time_load_thread_goes_back_to_normal_and_says_why() -> None:
    out = run("busy")
    assert out.startswith("OTHER"), out
    assert "normal priority since its load kept it busy" in out
    assert "real time would take that CPU from the server" in out


@pytest.mark.skipif(not hasattr(os, "sched_setscheduler"), reason="needs Linux scheduling")
def test_a_light_real_time_load_thread_keeps_real_time() -> None:
    assert run("light") == "RR []"
