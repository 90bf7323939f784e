"""Issue 26's on-screen findings an operator meets first, in a real terminal: a server that is
not OpenAI-compatible (``python3 -m http.server``) never looks healthy in the monitor: it ends
with bench's one-line error and status 2."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import poll_until, running_sim
from tests.e2e.test_tmux_cli import start
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    t = Tmux(f"infmon-op-{os.getpid()}", "op")
    try:
        yield t
    finally:
        t.run("kill-server", check=False)


@pytest.fixture
def plain_http(tmp_path: Path) -> Iterator[str]:
    """``python3 -m http.server`` on a free loopback port: it answers, but 404 to /v1/models."""
    with plain_http_server(tmp_path) as url:
        yield url


@contextmanager
def plain_http_server(cwd: Path) -> Iterator[str]:
    """``python3 -m http.server`` on a free loopback port, serving ``cwd``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def up() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                return False
            return True

        poll_until(up, timeout_s=20, what="http.server listening", proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_server_that_is_not_openai_compatible_ends_with_bench_error(
    tmux: Tmux, tmp_path: Path, plain_http: str
) -> None:
    start(tmux, plain_http, "--session-dir", str(tmp_path / "s"), status=tmp_path / "status")
    screen = tmux.wait_for("the exit", lambda s: (tmp_path / "status").exists(), timeout_s=90)
    assert "infmon: error: HTTP 404 from /v1/models (is this an OpenAI-compatible server" in screen
    assert "running · 0 failed" not in screen
    assert (tmp_path / "status").read_text().strip() == "status=2"


def test_the_monitor_says_units_acceptance_wrapped_paths_and_the_mode(
    tmux: Tmux, tmp_path: Path
) -> None:
    """Findings 8, 10 and 13 at 120×40 on the spec-pitfall simulator: the spec pane in the one
    vocabulary, the server's phases each with a unit, the report's path whole in the events
    pane after `s`, and rate mode offering the way back in the footer."""
    session = tmp_path / "spec-live"
    with running_sim("--scenario", "spec-pitfall", "--seed", "3") as url:
        start(
            tmux, url, "--concurrency", "2", "--session-dir", str(session),
            status=tmp_path / "status",
        )  # fmt: skip
        screen = tmux.wait_for(
            "spec and phase figures",
            lambda s: "mean acceptance length 1" in s and re.search(r"queue \S+ prefill \d", s),
            180,
        )
        assert "acceptance α" in screen and "acc " not in screen
        phases = re.search(r"queue (\S+) prefill (\S+) decode (\S+)", screen)
        assert phases is not None, screen
        assert all(re.fullmatch(r"(<1ms|[\d.,]+(ms|s)|—)", v) for v in phases.groups()), phases
        tmux.keys("s")
        screen = tmux.wait_for(  # in the events pane, once the notice is gone
            "the report event", lambda s: "report written:" in s and "▌" not in s, 60
        )
        events = "".join(line.rsplit("│", 2)[-2] for line in screen.splitlines() if "││" in line)
        assert str(session / "report.md") in "".join(events.split()), screen
        tmux.keys("r")
        tmux.wait_for(
            "rate mode, and the footer offering the way back",
            lambda s: "open loop" in s.splitlines()[0] and "r closed loop" in s.splitlines()[-1],
            30,
        )
        tmux.keys("q")
        tmux.wait_for("the exit", lambda s: (tmp_path / "status").exists(), 90)
    assert (tmp_path / "status").read_text().strip() == "status=0"


def test_replay_help_lists_replay_keys_and_the_sweep_stopped_event(
    tmux: Tmux, tmp_path: Path
) -> None:
    """Finding 9 in a terminal: `infmon replay` at the sweep's end shows "sweep stopped", and
    `?` lists the replay's keys (not the load's)."""
    from infmon.clock import FakeClock
    from infmon.journal.reader import SessionReader
    from infmon.journal.writer import JournalWriter
    from tests.synthetic import write_synthetic_session

    session = tmp_path / "recorded"
    write_synthetic_session(session, concurrencies=(1, 4, 16), step_duration_s=8.0)
    with SessionReader(session) as r:
        last = max(e["t"] for e in r.iter_events() if isinstance(e.get("t"), (int, float)))
    with JournalWriter(session, clock=FakeClock(last - 4.0), autoflush=False) as j:
        j.write_event("sweep", note="sweep stopped: knee at c=4; holding c=4")
    start(tmux, "replay", str(session), "--at", "1000", status=tmp_path / "status")
    tmux.wait_for("the replay", lambda s: "replay " in s and "sweep stopped" in s, 60)
    tmux.keys("?")
    screen = tmux.wait_for("the replay's keys", lambda s: "step start or mark" in s, 30)
    assert "double the load" not in screen and "automatic sweep" not in screen
    tmux.keys("q")  # closes the help
    tmux.wait_for("the help closed", lambda s: "step start or mark" not in s, 30)
    tmux.keys("q")
    tmux.wait_for("the exit", lambda s: (tmp_path / "status").exists(), 30)
