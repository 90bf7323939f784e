"""Helpers for the fault, restart, signal and secret tests: run `infmon bench`, audit its record."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from infmon.journal import SessionReader
from tests.conftest import REPO, default_sigint, infmon_cmd

KEY = "sk-infmon-DISTINCTIVE-7f3a9c-never-leak"
"""A key no file, line or title of a session may contain."""


def bench_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment: no user config file, no inherited key."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY",) and not k.startswith("INFMON_")
    }
    env.update(
        XDG_CONFIG_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path), PYTHONUNBUFFERED="1", **extra
    )
    return env


def bench_args(url: str, session: Path, *extra: str) -> list[str]:
    return infmon_cmd(
        "bench",
        url,
        "--session-dir",
        str(session),
        "--output-tokens",
        "16",
        "--warmup",
        "0",
        *extra,
    )


def run_bench(
    url: str, tmp_path: Path, *extra: str, timeout_s: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        bench_args(url, tmp_path / "session", *extra),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=bench_env(tmp_path),
    )


def start_bench(url: str, tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    """Start bench; returns once it printed its ``target:`` line (load is running)."""
    proc = subprocess.Popen(
        bench_args(url, tmp_path / "session", *extra),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=bench_env(tmp_path),
        preexec_fn=default_sigint,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"bench ended early: {proc.communicate()[1]}")
        if line.startswith("target:"):
            return proc
    proc.kill()
    raise AssertionError("bench did not start")


@dataclass(frozen=True)
class Audit:
    """What the session record says about every request sent."""

    sent: int
    succeeded: int
    failed: int
    cancelled: int
    kinds: Counter[str]
    statuses: Counter[int]
    events: list[dict]


def audit(session: Path) -> Audit:
    """Check the record accounts for every request: ids 0..N-1 each exactly once, no torn lines."""
    reader = SessionReader(session)
    records = list(reader.iter_records())
    events = list(reader.iter_events())
    assert reader.skipped[0] == 0, "unparseable lines in the session record"
    ids = sorted(r.request_id for r in records)
    assert ids == list(range(len(ids))), "a request id is missing or recorded twice"
    kinds = Counter(r.error_kind or "ok" for r in records)
    statuses = Counter(r.http_status for r in records if r.http_status is not None and not r.ok)
    cancelled = kinds["cancelled"]
    succeeded = kinds["ok"]
    failed = len(records) - succeeded - cancelled
    totals = [e for e in events if e["kind"] == "load_totals"]
    assert len(totals) == 1, "the driver's own counts were not recorded"
    t = totals[0]
    assert (t["sent"], t["succeeded"], t["failed"], t["cancelled"]) == (
        len(records),
        succeeded,
        failed,
        cancelled,
    )
    assert t["sent"] == t["succeeded"] + t["failed"] + t["cancelled"]
    for r in records:  # a failed request carries data, not a traceback
        if not r.ok:
            assert r.error_message and "Traceback" not in r.error_message
    return Audit(len(records), succeeded, failed, cancelled, kinds, statuses, events)


def assert_no_crash(r: subprocess.CompletedProcess[str] | tuple[str, str]) -> None:
    out, err = (r.stdout, r.stderr) if isinstance(r, subprocess.CompletedProcess) else r
    assert "Traceback" not in out + err, err[-3000:]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_sim(port: int, *args: str) -> subprocess.Popen[str]:
    """``infmon sim`` on a fixed port (so it can be killed and started again at the same URL)."""
    proc = subprocess.Popen(
        infmon_cmd("sim", "--port", str(port), "--seed", "2", *args),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line:
            return proc
        if not line:
            break
    proc.kill()
    raise AssertionError("simulator did not start")


def stop_proc(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
