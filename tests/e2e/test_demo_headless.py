"""`infmon demo --headless`: the simulator starts, a short sweep prints its table, nothing is left."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd
from tests.e2e.test_tmux_demo import sim_processes

pytestmark = pytest.mark.e2e


def test_demo_headless_prints_the_table(tmp_path: Path):
    marker = "--seed=424242"
    out = subprocess.run(
        infmon_cmd(
            "demo",
            "--headless",
            "--duration",
            "8",
            "--concurrency",
            "1,4",
            "--session-dir",
            str(tmp_path / "s"),
            f"--sim-arg={marker}",
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [r[1] for r in rows] == ["c=1", "c=4"]
    assert all(float(r[4].replace(",", "")) > 0 for r in rows)  # output tokens/s
    assert (tmp_path / "s" / "report.md").exists()
    assert sim_processes(marker) == []
