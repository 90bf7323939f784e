"""End to end in a real terminal: `infmon demo` in tmux, driven by keys only.

The demo starts sweeping by itself, space pauses it, `]` takes the dial and raises the
concurrency, the panes show nonzero throughput and server
metrics, `s` writes a report, `q` quits, and the simulator process is gone afterwards.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


class Tmux:
    def __init__(self, socket: str, name: str) -> None:
        # a server of its own per instance: a test's tmux server that ``kill-server`` has not
        # yet taken down must not be the next test's (``new-session`` failed there in CI)
        self.socket, self.name = f"{socket}-{uuid.uuid4().hex[:8]}", name

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args[:1])} exited {out.returncode}: {out.stderr}")
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name, check=False)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys)

    def alive(self) -> bool:
        """The session (the command it runs) is still there."""
        probe = ["tmux", "-L", self.socket, "has-session", "-t", self.name]
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0

    def wait_for(self, what: str, test: Callable[[str], bool], timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if test(screen):
                return screen
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")


def sim_processes(marker: str) -> list[int]:
    """PIDs of simulator processes started with our unique seed."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sim" in argv and marker.encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.fixture
def tmux(tmp_path) -> Iterator[tuple[Tmux, Path, str]]:
    socket = f"infmon-e2e-{os.getpid()}"
    seed = str(random.randint(100_000, 999_999))
    session_dir = tmp_path / "session"
    command = " ".join(
        [
            *infmon_cmd("demo"),
            "--session-dir",
            str(session_dir),
            "--scrape-interval",
            "0.5",
            f"--sim-arg=--seed={seed}",
        ]
    )
    t = Tmux(socket, "demo")
    t.run(
        "new-session",
        "-d",
        "-s",
        "demo",
        "-x",
        "120",
        "-y",
        "40",
        "-c",
        str(REPO),
        f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
    )
    try:
        yield t, session_dir, seed
    finally:
        t.run("kill-server", check=False)
        for pid in sim_processes(f"--seed={seed}"):
            os.kill(pid, 9)


def number_after(label: str, screen: str) -> float:
    """The number printed after ``label`` in a pane (``out 410 tok/s``, ``running 8  waiting``)."""
    match = re.search(rf"{label}\s+([\d,.]+)\s+(?:tok/s|/|waiting)", screen)
    return float(match.group(1).replace(",", "")) if match else 0.0


def test_demo_in_tmux(tmux):
    t, session_dir, seed = tmux
    # the demo sweeps by itself: no key needed to see the load climb
    t.wait_for("the sweep", lambda s: "sweeping" in s, timeout_s=90)
    assert sim_processes(f"--seed={seed}"), "the simulator should be running"
    t.keys("space")  # pause: the sweep waits
    t.wait_for("paused", lambda s: "paused" in s)
    for _ in range(3):
        t.keys("]")  # the operator takes the dial: the sweep stops, the load doubles
    t.keys("space")
    t.wait_for("c=8", lambda s: "closed loop c=8" in s and "running" in s)
    screen = t.wait_for(
        "throughput and server metrics",
        lambda s: number_after("out", s) > 0 and number_after("running", s) > 0,
        timeout_s=60,
    )
    assert "KV cache" in screen and "tok/s" in screen
    t.keys("s")
    t.wait_for("the report", lambda s: "report written" in s, timeout_s=60)
    assert (session_dir / "screenshot.svg").exists()
    t.keys("q")
    t.wait_for("the app to quit", lambda s: "session recorded in" in s, timeout_s=60)
    deadline = time.monotonic() + 10
    while sim_processes(f"--seed={seed}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sim_processes(f"--seed={seed}") == []
