"""The live monitor in a real terminal shows the GPU pane from the simulator's DCGM endpoint and
names the other process on the GPU in the `contention` scenario; on `baseline` at saturation
(more streams than max_num_seqs: requests wait) it names no contention. The report written on
quit names it on the step (issue 22, must show 2). About a minute."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,  # two monitors in tmux up to saturation: ~15 s each
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]
CONTENTION = "GPU contention: another pod on GPU 0 (noisy-neighbour-0: 3.1 GiB, SM 3"


def monitor(scenario: str, concurrency: int, session: Path, until: str) -> tuple[str, str]:
    """The screen once ``until`` shows and ~8 s later; quits and waits for the report."""
    name = f"gpu-{scenario}"
    with running_sim("--scenario", scenario, "--seed", "7") as url:
        command = " ".join(
            [
                *infmon_cmd(url),
                "--gpu-metrics",
                f"{url}/gpu-metrics",
                "--concurrency",
                str(concurrency),
                "--session-dir",
                str(session),
            ]
        )
        t = Tmux(f"infmon-{name}-{os.getpid()}", name)
        t.run(
            "new-session",
            *("-d", "-s", name, "-x", "200", "-y", "60", "-c", str(REPO)),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )
        t.run("resize-window", "-t", name, "-x", "200", "-y", "60")
        try:
            first = t.wait_for(until, lambda s: until in s and "─ GPU ─" in s, 90)
            t.wait_for("8 s of load", lambda s: "running 00:00:1" in s, 60)
            later = t.screen()
            t.keys("q")
            t.wait_for("the report", lambda s: (session / "report.md").exists(), 60)
            # where the GPU's power is known, the monitor says each step's energy as it ends
            closing = t.wait_for("the energy line", lambda s: "energy per step (serving" in s, 30)
        finally:
            t.run("kill-server", check=False)
    said = " ".join(closing.split())  # the terminal folds the line
    assert f"energy per step (serving GPUs): c={concurrency} " in said and " J/token" in said
    return first, later


def test_contention_scenario_names_the_other_pod(tmp_path: Path) -> None:
    first, later = monitor("contention", 16, tmp_path / "s", "GPU contention")
    print(later)
    for screen in (first, later):
        assert "GPU 0 NVIDIA RTX 6000 Ada" in screen and "DRAM" in screen
        assert "other 3.1G SM 3" in screen and "noisy-neighbour-0" in screen  # the pane
        # the diagnosis (the events pane beside the knee table may cut the line's end)
        assert CONTENTION.split(", SM")[0] in screen
    report = (tmp_path / "s" / "report.md").read_text()
    assert "## GPU" in report and f"- c=16: {CONTENTION}" in report


def test_baseline_at_saturation_names_no_contention(tmp_path: Path) -> None:
    first, later = monitor("baseline", 400, tmp_path / "s", "queueing:")
    print(later)
    for screen in (first, later):
        assert "GPU 0 NVIDIA RTX 6000 Ada" in screen and "other " not in screen
        assert "contention" not in screen
    report = (tmp_path / "s" / "report.md").read_text()
    assert "## GPU" in report and "contention" not in report
