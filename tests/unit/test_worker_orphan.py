"""A load worker never outlives its controller, even when another process still holds the
write end of its control pipe (so it sees no end of file): it notices it was orphaned."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

SPAWN = """
import os, subprocess, sys
ctrl_r, data_w = int(sys.argv[1]), int(sys.argv[2])
w = subprocess.Popen([sys.executable, "-m", "infmon.engine.worker", str(ctrl_r), str(data_w),
                      str(os.getpid())],
                     pass_fds=(ctrl_r, data_w), start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(w.pid, flush=True)
os._exit(0)  # the controller dies; the test process still holds the control pipe's write end
"""


@pytest.mark.timeout(60)
def test_an_orphaned_worker_exits_though_its_control_pipe_stays_open() -> None:
    ctrl_r, ctrl_w = os.pipe()
    data_r, data_w = os.pipe()
    try:
        out = subprocess.run(
            [sys.executable, "-c", SPAWN, str(ctrl_r), str(data_w)],
            pass_fds=(ctrl_r, data_w),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=30,
        )
        pid = int(out.stdout.split()[0])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        assert not _alive(pid), "the orphaned worker is still running"
    finally:
        for fd in (ctrl_r, ctrl_w, data_r, data_w):
            os.close(fd)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
