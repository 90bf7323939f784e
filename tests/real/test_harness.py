"""The harness itself: the cached env is complete and usable, and servers are always stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.real.harness import Tmux, _alive, _zombie_exit_code, rs

pytestmark = pytest.mark.real_server


def test_cached_env_is_complete(real_setup) -> None:
    venv, model = real_setup
    marker = json.loads((venv / rs.MARKER).read_text())
    assert marker["vllm"].startswith(rs.VLLM_VERSION) and marker["torch"].endswith("+cpu")
    assert not venv.with_name(venv.name + ".partial").exists()
    assert (model / rs.MARKER).is_file() and (model / "config.json").is_file()
    assert json.loads((model / "config.json").read_text())["n_layer"] == 2


def test_server_is_stopped_with_its_children(real_setup, tmp_path: Path) -> None:
    with rs.serve_transformers(tmp_path) as server:
        os.killpg(server.pid, 0)  # running, in its own process group
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)


def test_pinned_tree_pins_every_thread_and_restores(tmp_path: Path) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    code = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while (
            len(list(Path(f"/proc/{proc.pid}/task").iterdir())) < 2 and time.monotonic() < deadline
        ):
            time.sleep(0.05)
        tids = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
        assert len(tids) == 2
        with rs.pinned_tree(proc.pid, {cpus[-1]}) as n:
            assert n == 2 and all(os.sched_getaffinity(t) == {cpus[-1]} for t in tids)
        assert all(os.sched_getaffinity(t) == set(cpus) for t in tids)
    finally:
        proc.kill()
        proc.wait()


def test_tmux_close_reports_a_process_that_outlives_its_session(tmp_path: Path) -> None:
    """The guarantee the TUI tests rely on: a pane process that ignores SIGHUP is found and killed."""
    tmux = Tmux("infmon-harness", tmp_path)
    tmux.start(["sh", "-c", "trap '' HUP; sleep 300 & wait"], cwd=tmp_path)
    deadline = time.monotonic() + 10
    while len(tmux.pids) < 2 and time.monotonic() < deadline:
        tmux.note_pids()
        time.sleep(0.1)
    leftovers = tmux.close(grace_s=1.0)
    assert leftovers and set(leftovers) == tmux.pids, (leftovers, tmux.pids)
    time.sleep(0.2)
    assert not any(_alive(p) for p in leftovers)


def test_exit_status_is_read_from_an_unreaped_zombie() -> None:
    """What `Tmux.pane_dead` falls back on when tmux has not reaped the pane's process yet."""
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    try:
        deadline = time.monotonic() + 5
        while _zombie_exit_code(pid) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _zombie_exit_code(pid) == 3 << 8 and not _alive(pid)
    finally:
        os.waitpid(pid, 0)
    assert _zombie_exit_code(os.getpid()) is None and _alive(os.getpid())
