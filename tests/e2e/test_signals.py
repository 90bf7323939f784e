"""SIGTERM and SIGHUP end `infmon bench` as Ctrl+C does: streams cancelled within 2 s, every request
recorded, the record closed, the report written, a clean exit (128 + signal)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, poll_until
from tests.e2e.faultkit import Audit, assert_no_crash, audit, bench_args, bench_env, start_bench
from tests.loadkit.server import Behaviour, serve

pytestmark = pytest.mark.e2e
LONG = ("--concurrency", "4", "--step-duration", "60", "--output-tokens", "400")


def _assert_clean_stop(session: Path, signame: str) -> Audit:
    a = audit(session)
    assert a.sent >= 4 and a.cancelled >= 1, a  # long streams were in flight when the signal came
    assert a.failed == 0
    kinds = [e["kind"] for e in a.events]
    assert {"kind": "interrupted", "signal": signame}.items() <= next(
        e for e in a.events if e["kind"] == "interrupted"
    ).items()
    assert kinds[-1] == "session_end"
    assert (session / "report.md").exists() and (session / "report.html").exists()
    return a


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_stops_bench_cleanly_within_2s(tmp_path: Path, sig: signal.Signals) -> None:
    b = Behaviour(ttft_s=0.05, itl_s=0.05)
    with serve(b) as url:
        proc = start_bench(url, tmp_path, *LONG)
        poll_until(lambda: b.started >= 4, 60, "4 streams in flight", proc)
        t0, wall0 = time.monotonic(), time.time()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=15)
        elapsed_s = time.monotonic() - t0
    assert_no_crash((out, err))
    assert proc.returncode == 128 + sig, err
    if sig != signal.SIGINT:
        assert f"stopped by {sig.name}" in err
    a = _assert_clean_stop(tmp_path / "session", sig.name)
    stopped = next(e for e in a.events if e["kind"] == "load_totals")
    assert stopped["wall"] - wall0 < 2.0  # every stream cancelled and recorded within 2 s
    assert elapsed_s < 4.0  # plus writing the report
    assert "session recorded in" in out


def test_hangup_with_the_terminal_gone(tmp_path: Path) -> None:
    """The SSH case: stdout/stderr are a terminal that disappears, then SIGHUP arrives."""
    master, slave = pty.openpty()
    b = Behaviour(ttft_s=0.05, itl_s=0.05)
    with serve(b) as url:
        proc = subprocess.Popen(
            bench_args(url, tmp_path / "session", *LONG),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env=bench_env(tmp_path),
            start_new_session=True,
        )
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 30
        while b"target:" not in seen and time.monotonic() < deadline:
            seen += os.read(master, 4096)
        poll_until(lambda: b.started >= 4, 60, "4 streams in flight", proc)
        os.close(master)  # the terminal is gone: writes to it now fail
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=15)
    assert proc.returncode == 128 + signal.SIGHUP
    _assert_clean_stop(tmp_path / "session", "SIGHUP")
