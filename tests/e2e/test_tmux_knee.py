"""A live sweep in a real terminal names the knee with the server's evidence, and the screen,
``report.json`` and an offline ``infmon report`` agree (issue 13, must show 3).

`infmon URL --step-duration 8` on the baseline simulator (max_num_seqs 256), `w` pressed:
the sweep doubles 1 … 512, sees the server's running count stop at 256 while 256 wait, stops,
and holds c=256. About two minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


def test_a_live_sweep_names_the_knee_with_server_evidence(tmp_path) -> None:
    session = tmp_path / "session"
    with running_sim("--scenario", "baseline", "--seed", "11") as url:
        command = " ".join(
            [*infmon_cmd(url), "--step-duration", "8", "--session-dir", str(session)]
        )
        t = Tmux(f"infmon-knee-{os.getpid()}", "knee")
        t.run(
            "new-session",
            "-d",
            "-s",
            "knee",
            "-x",
            "200",
            "-y",
            "60",
            "-c",
            str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )
        t.run("resize-window", "-t", "knee", "-x", "200", "-y", "60")
        try:
            t.wait_for("the monitor", lambda s: "paused" in s, 60)
            t.keys("w")
            screen = t.wait_for(
                "the sweep to stop", lambda s: "sweep stopped: knee at c=" in s, 200
            )
            print(screen)
            t.wait_for("the knee pane to settle", lambda s: re.search(r"knee c=\d+ ", s), 30)
            screen = t.screen()
            shown = int(re.search(r"knee c=(\d+) ", screen).group(1))
            stop = re.search(r"sweep stopped: knee at c=(\d+) \(([^)\n]*)", screen)
            t.keys("q")
            t.wait_for("the report", lambda s: (session / "report.json").exists(), 60)
        finally:
            t.run("kill-server", check=False)
    assert 128 <= shown <= 512
    assert stop is not None and int(stop.group(1)) == shown
    assert "running capped at" in stop.group(2) and "wait" in stop.group(2)
    doc = json.loads((session / "report.json").read_text())
    assert doc["knee"]["concurrency"] == shown and doc["knee"]["evidence"] == "server"
    out = tmp_path / "offline"
    r = subprocess.run(
        infmon_cmd("report", str(session), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "report.json").read_text())["knee"] == doc["knee"]
