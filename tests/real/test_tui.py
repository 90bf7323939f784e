"""The Textual monitor in tmux against a real vLLM: panes fill, `s` writes a report, `q` exits.

The ``tui`` fixture (conftest.py) fails the test if the monitor outlives its tmux session.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.real.harness import Tmux, rs

pytestmark = pytest.mark.real_server

TOKS = re.compile(r"[1-9][\d,]*(?:\.\d+)? tok/s")
PANES = ("Throughput", "Latency", "Server", "KV cache")


def _reports(session: Path) -> list[Path]:
    return [p for p in session.rglob("report*") if p.is_file() and p.stat().st_size > 0]


def quit_cleanly(tmux: Tmux, timeout_s: float = 30.0) -> None:
    """Press `q`; the pane's process must exit with status 0 within TIMEOUT_S."""
    tmux.keys("q")
    deadline = time.monotonic() + timeout_s
    while not tmux.pane_dead()[0] and time.monotonic() < deadline:
        time.sleep(0.5)
    dead, status = tmux.pane_dead()
    assert dead and status == "exit 0", f"`q` did not exit cleanly ({status}):\n{tmux.screen()}"


def test_tui_against_real_vllm(vllm: rs.Server, tui) -> None:
    tmux, session = tui(vllm.url)
    screen = tmux.wait_for(
        lambda s: all(p in s for p in PANES) and TOKS.search(s) is not None,
        timeout_s=60,
        what="panes with live figures",
    )
    assert "Traceback" not in screen, screen
    print(f"\nTUI against real vLLM:\n{screen}")
    tmux.keys("s")
    deadline = time.monotonic() + 30
    while not _reports(session) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _reports(session), f"`s` wrote no report in {session}; screen:\n{tmux.screen()}"
    quit_cleanly(tmux)
