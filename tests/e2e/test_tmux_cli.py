"""Finding 13 in a real terminal: options before the URL open the monitor at that level, and
a monitor that never reached its server ends with one line and a non-zero status."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(f"infmon-cli-{os.getpid()}", "cli")
    try:
        yield t
    finally:
        t.run("kill-server", check=False)


def start(t: Tmux, *args: str, status: Path) -> None:
    command = " ".join(infmon_cmd(*args))
    t.run(
        "new-session",
        "-d",
        "-s",
        t.name,
        "-x",
        "120",
        "-y",
        "40",
        "-c",
        str(REPO),
        f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; echo status=$? > {status}; "
        "sleep 30",
    )


def test_options_before_the_url_open_the_monitor(tmux: Tmux, tmp_path: Path) -> None:
    with running_sim("--seed", "5") as url:
        start(
            tmux,
            "--concurrency",
            "4",
            "--session-dir",
            str(tmp_path / "s"),
            url,
            status=tmp_path / "status",
        )
        tmux.wait_for("the monitor at c=4", lambda s: "closed loop c=4" in s, timeout_s=60)
        tmux.keys("q")
        screen = tmux.wait_for("the exit", lambda s: "session recorded in" in s, timeout_s=60)
    assert "unrecognized arguments" not in screen
    assert (tmp_path / "status").read_text().strip() == "status=0"


def test_a_server_never_reached_is_one_line_and_status_2(tmux: Tmux, tmp_path: Path) -> None:
    start(
        tmux,
        "http://127.0.0.1:9",
        "--session-dir",
        str(tmp_path / "s"),
        "--scrape-interval",
        "0.5",
        status=tmp_path / "status",
    )
    tmux.wait_for("the server shown down", lambda s: "DOWN since" in s, timeout_s=60)
    tmux.keys("q")
    screen = tmux.wait_for("the exit", lambda s: "status=" in s or "never reached" in s)
    lines = [line for line in screen.splitlines() if line.startswith("infmon")]
    assert lines == [
        "infmon: error: never reached http://127.0.0.1:9 (All connection attempts failed)"
    ], screen
    tmux.wait_for("the status file", lambda s: (tmp_path / "status").exists())
    assert (tmp_path / "status").read_text().strip() == "status=2"
    assert not (tmp_path / "s" / "report.md").exists()  # no report of nothing
