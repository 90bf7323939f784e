"""Issue 26 finding 9 in a terminal: `infmon replay` of a real demo journal, its cursor put at
the moment the live sweep stopped on the knee, shows the knee the live screen showed then
(``knee c=256``, its row ``◀ knee``); ten seconds earlier it shows ``knee not yet``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.e2e.test_tmux_cli import start
from tests.e2e.test_tmux_demo import Tmux
from tests.recorded import unpack_journal
from tests.ui.test_replay_knee import sweep_stop

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


@pytest.mark.parametrize("before_s", [0.0, 10.0], ids=["at-the-stop", "10-s-before"])
def test_the_replay_shows_the_knee_at_the_live_stop(tmp_path: Path, before_s: float) -> None:
    from infmon.journal.reader import SessionReader

    session = unpack_journal("demo-knee", tmp_path / "demo")
    stop_t, knee, _, _ = sweep_stop(session)
    with SessionReader(session) as r:
        at = stop_t - r.origin_s() - before_s
    t = Tmux(f"infmon-replay-knee-{os.getpid()}-{int(before_s)}", "rk")
    try:
        start(t, "replay", str(session), "--at", f"{at:.2f}", status=tmp_path / "status")
        if before_s:
            want = ["knee not yet"]
        else:
            want = [f"knee c={knee}", "◀ knee", f"sweep stopped: knee at c={knee}"]
        t.wait_for(
            f"the replay at {at:.2f} s showing {want}",
            lambda s: "replay 00:01:" in s and all(w in " ".join(s.split()) for w in want),
            60,
        )
        t.keys("q")
        t.wait_for("the exit", lambda s: (tmp_path / "status").exists(), 30)
    finally:
        t.run("kill-server", check=False)
