"""Findings 8 and 13 in a real terminal: bench's output fits a 100-column terminal; options
before the URL open the monitor at that level, and a monitor that never reached its server ends
with one line and a non-zero status."""

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


def start(t: Tmux, *args: str, status: Path, width: int = 120) -> None:
    command = " ".join(infmon_cmd(*args))
    t.run(
        "new-session",
        "-d",
        "-s",
        t.name,
        "-x",
        str(width),
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


def test_bench_output_fits_100_columns(tmux: Tmux, tmp_path: Path) -> None:
    """Finding 8: the bench table was 140 columns and wrapped; at 100 it is one line a row."""
    with running_sim("--seed", "8") as url:
        start(
            tmux,
            "bench",
            url,
            "--concurrency",
            "1,4",
            "--step-duration",
            "3s",
            "--session-dir",
            str(tmp_path / "s"),
            status=tmp_path / "status",
            width=100,
        )
        tmux.wait_for("the status file", lambda s: (tmp_path / "status").exists(), 120)
    # -J joins wrapped lines: a line that wrapped comes back longer than the terminal
    joined = tmux.run("capture-pane", "-p", "-J", "-t", tmux.name, "-S", "-200")
    lines = [line.rstrip() for line in joined.splitlines() if line.strip()]
    assert (tmp_path / "status").read_text().strip() == "status=0", joined
    rows = [line for line in lines if line.split()[1:2] in (["c=1"], ["c=4"])]
    assert len(rows) == 2, joined  # one row per step, each on one line
    header = next(line for line in lines if "TTFT" in line and "tok/s" in line)
    assert len(rows[0].split()) == len(rows[1].split()) == 10, rows
    session = str(tmp_path)  # the only text longer than the terminal may be a path it printed
    long = [line for line in lines if len(line) > 100 and session not in line]
    assert not long and len(header) <= 100, long or header
