"""The monitor's ``w`` with ``--search slo`` in a real terminal against the simulator: the key
runs the load search (not the doubling sweep), the header and knee pane follow its probes, and
it ends on one verdict line, holding the level found, with ``search.json`` in the session that
parses with its schema and agrees with the screen and the report's SLO limit."""

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
            "new-session", "-d", "-s", "search", "-x", "170", "-y", "50", "-c", str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )  # fmt: skip
        t.run("resize-window", "-t", "search", "-x", "170", "-y", "50")
        try:
            t.wait_for("the monitor", lambda s: "paused" in s, 60)
            t.keys("w")
            t.wait_for("the first probe", lambda s: "search 1/12: c=16" in s, 60)
            screen = t.wait_for("the verdict", lambda s: "SLO frontier (ttft≤500ms" in s, 300)
            print(screen)
            t.wait_for("search.json", lambda s: (session / "search.json").exists(), 30)
            doc = parse_search_doc(json.loads((session / "search.json").read_text()))
            t.keys("q")
            t.wait_for("the report", lambda s: (session / "report.json").exists(), 60)
        finally:
            t.run("kill-server", check=False)
    assert doc["line"] in screen  # the verdict stays in view on the hint line
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
