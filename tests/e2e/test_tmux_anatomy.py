"""The latency anatomy in a real terminal (issue 28, must show 2): on the simulator serving
vLLM's per-request metrics, a sweep past the knee shows the queue time growing while the
client-side share stays flat.

`infmon sim --max-num-seqs 8 --enable-per-request-metrics`; `infmon URL --step-duration 5`,
`w` then `a`: the sweep doubles 1, 2, 4, 8, 16 (the server runs at most 8: past c=8 requests
queue) and stops there, naming the knee at c=8 (8 wait at c=16); the anatomy rows (p50, ms) are
read off the screen. About a minute.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

ROW = re.compile(
    r"c=(\d+)\s+(\d+)\s+([\d.–]+)\s+([\d.–]+)\s+([\d.–]+)\s+([\d.–]+)\s+([\d.–-]+)\s+([\d.–-]+)"
)


def rows(screen: str) -> dict[int, dict[str, float]]:
    """The anatomy rows on the screen (the last row of a level wins: a revisit)."""
    out = {}
    for m in ROW.finditer(screen):
        c, n, _front, queue, _prefill, _decode, _tail, client = m.groups()
        out[int(c)] = {"n": float(n), "queue": float(queue), "client": float(client)}
    return out


def test_queue_grows_past_the_knee_while_the_client_side_share_stays_flat(tmp_path) -> None:
    session = tmp_path / "session"
    sim = ("--scenario", "baseline", "--seed", "28", "--max-num-seqs", "8")
    with running_sim(*sim, "--enable-per-request-metrics") as url:
        command = " ".join(
            [*infmon_cmd(url), "--step-duration", "5", "--session-dir", str(session)]
        )
        t = Tmux(f"infmon-anatomy-{os.getpid()}", "anatomy")
        t.run(
            "new-session",
            "-d",
            "-s",
            "anatomy",
            "-x",
            "200",
            "-y",
            "60",
            "-c",
            str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )
        t.run("resize-window", "-t", "anatomy", "-x", "200", "-y", "60")
        try:
            t.wait_for("the monitor", lambda s: "paused" in s, 60)
            t.keys("w")
            t.keys("a")
            t.wait_for("the anatomy view", lambda s: "Latency anatomy" in s, 30)
            screen = t.wait_for(
                "a step well past the knee",
                lambda s: any(c >= 16 and r["n"] >= 8 for c, r in rows(s).items()),
                240,
            )
            print(screen)
            seen = rows(screen)
            t.keys("q")
            t.wait_for("the report", lambda s: (session / "report.json").exists(), 60)
        finally:
            t.run("kill-server", check=False)
    low, high = min(seen), max(seen)
    assert low == 1 and high >= 16, seen  # a step below and one past the knee (8 running)
    assert seen[high]["queue"] >= max(5.0, 5 * seen[low]["queue"]), seen
    client_low, client_high = seen[low]["client"], seen[high]["client"]
    assert client_high <= max(2 * client_low, client_low + 5.0), seen
    assert "grows with load" not in screen
