"""The monitor's ``w`` with ``--search slo`` in a real terminal against the simulator: the key
(the footer's ``w search slo``) runs the load search, not the doubling sweep; the header and the
knee pane follow its probes, the knee pane drawing the frontier chart live (issue 29, must show
1: tok/s per user against total output tok/s, ``●``/``×`` per probe, the TPOT bound at 20 tok/s
per user) at 120×40 and 200×60; it ends on one verdict line, holding the level found, with
``search.json`` in the session that parses with its schema and agrees with the screen and the
report's steps."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from infmon.model.search.search_json import parse_search_doc
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


CHART = "frontier · ● meets  × misses  ─ TPOT 20/s"
"""The chart's title: the SLO's TPOT bound of 50 ms is 20 tok/s per user."""


def _chart(screen: str) -> str:
    """The frontier chart's rows on the screen (right of the table, below the title)."""
    lines = screen.splitlines()
    top = next(i for i, line in enumerate(lines) if CHART in line)
    col = lines[top].index(CHART)
    end = lines[top].index("│", col)  # the knee pane's right border
    rows = []
    for line in lines[top + 1 :]:
        if line.startswith("╰"):  # the pane's bottom border
            break
        rows.append(line[col:end])
    return "\n".join(rows)


@pytest.mark.timeout(420)
def test_w_with_search_finds_and_holds_the_slo_frontier_live(tmp_path) -> None:
    session = tmp_path / "session"
    with running_sim("--scenario", "baseline") as url:
        command = " ".join(
            [*infmon_cmd(url), "--search", "slo", "--slo", "ttft=500ms,tpot=50ms",
             "--search-range", "16-256", "--step-duration", "3", "--warmup", "1",
             "--output-tokens", "16-48", "--session-dir", str(session)]
        )  # fmt: skip
        t = Tmux(f"infmon-search-{os.getpid()}", "search")
        t.run(
            "new-session", "-d", "-s", "search", "-x", "120", "-y", "40", "-c", str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )  # fmt: skip
        t.run("resize-window", "-t", "search", "-x", "120", "-y", "40")
        try:
            before = t.wait_for("the monitor", lambda s: "w search slo" in s, 60)
            assert "w searches for the SLO frontier" in before and "w sweep" not in before
            t.keys("w")
            t.wait_for("the first probe", lambda s: "search 1/12 · c=16" in s, 60)
            live = t.wait_for("the chart, live", lambda s: "search 3/12" in s and CHART in s, 120)
            print(live)
            assert "w stop search" in live and "output tok/s" in live and "●c=16" in live
            t.wait_for("search.json", lambda s: (session / "search.json").exists(), 300)
            at_120 = t.wait_for("the verdict", lambda s: "SLO frontier (ttft≤500ms" in s, 30)
            print(at_120)
            doc = parse_search_doc(json.loads((session / "search.json").read_text()))
            t.run("resize-window", "-t", "search", "-x", "200", "-y", "60")
            wide = lambda s: doc["line"] in s and CHART in s and "TTFT p90" in s  # noqa: E731
            screen = t.wait_for("200×60: the table's every column beside the chart", wide, 30)
            print(screen)
            t.keys("q")
            t.wait_for("the report", lambda s: (session / "report.json").exists(), 60)
        finally:
            t.run("kill-server", check=False)
    assert doc["line"] in screen  # the verdict stays in view on the hint line
    for shot in (at_120, screen):  # the chart stays, every probe on it: ● meets, × misses
        assert CHART in shot and "×" in _chart(shot) and "●" in _chart(shot)
        assert "output tok/s" in shot and " ┤" in shot
    assert doc["status"] == "found" and doc["found"] is not None, doc["line"]
    found = doc["found"]["level"]
    assert doc["bound"] is not None and doc["bound"]["level"] > found
    assert 2 <= len(doc["probes"]) <= 12 and doc["probes"][0]["level"] == 16
    assert f"closed loop c={found:g} " in screen  # the monitor holds the level found
    report = json.loads((session / "report.json").read_text())
    steps = {s["step"]: s for s in report["steps"]}
    for p in doc["probes"]:  # each probe is the report's step, settled, all its requests
        s = steps[p["step"]]
        assert s["settled"] and p["requests"] == s["completed"] + s["failed"]
