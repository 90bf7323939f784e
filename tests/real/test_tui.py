"""The Textual monitor in tmux against a real vLLM: panes fill, `s` writes a report, `q` exits."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from tests.real.harness import REPO, Tmux, rs

pytestmark = pytest.mark.real_server

TOKS = re.compile(r"[1-9][\d,]*(?:\.\d+)? tok/s")
PANES = ("Throughput", "Latency", "Server", "KV cache")


def _monitor_cmd(url: str, session: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "infmon", "monitor", url, "--session-dir", str(session),
            "--concurrency", "2", "--prompt-tokens", "32", "--output-tokens", "32", *extra]  # fmt: skip


def _reports(session: Path) -> list[Path]:
    return [p for p in session.rglob("report*") if p.is_file() and p.stat().st_size > 0]


def _run_tui(url: str, tmp_path: Path, *extra: str):
    tmux = Tmux("infmon-real", tmp_path)
    session = tmp_path / "session"
    tmux.start(["env", f"PYTHONPATH={REPO}", *_monitor_cmd(url, session, *extra)], cwd=tmp_path)
    return tmux, session


def test_tui_against_real_vllm(vllm: rs.Server, tmp_path: Path) -> None:
    tmux, session = _run_tui(vllm.url, tmp_path)
    try:
        screen = tmux.wait_for(
            lambda s: all(p in s for p in PANES) and TOKS.search(s) is not None,
            timeout_s=60, what="panes with live figures",
        )
        assert "Traceback" not in screen, screen
        print(f"\nTUI against real vLLM:\n{screen}")
        tmux.keys("s")
        deadline = time.monotonic() + 30
        while not _reports(session) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _reports(session), f"`s` wrote no report in {session}; screen:\n{tmux.screen()}"
        tmux.keys("q")
        deadline = time.monotonic() + 30
        while not tmux.pane_dead()[0] and time.monotonic() < deadline:
            time.sleep(0.5)
        dead, status = tmux.pane_dead()
        assert dead and status == "exit 0", f"`q` did not exit cleanly ({status}):\n{tmux.screen()}"
    finally:
        tmux.close()
