"""Run ``infmon sim`` as a child process and learn where it listens: the one way the demo, the
tests and the benchmarks start a simulator (``--port 0`` picks a free port; the simulator
prints ``listening on http://HOST:PORT``).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

LISTEN_RE = re.compile(r"listening on (http://\S+)")
START_TIMEOUT_S = 30.0


class SimulatorStartError(RuntimeError):
    """The simulator ended, or said nothing useful, before telling where it listens."""


def start_simulator(
    args: Sequence[str],
    *,
    timeout_s: float = START_TIMEOUT_S,
    cwd: str | Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Start ``python -m infmon sim ARGS``; returns the process and its base URL (no trailing
    slash). Its output keeps being drained, so a chatty simulator never blocks on a full pipe."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infmon", "sim", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=preexec_fn,
    )
    try:
        return proc, _wait_for_url(proc, timeout_s)
    except BaseException:
        stop_process(proc)
        raise


def _wait_for_url(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        match = LISTEN_RE.search(line)
        if match:
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return match.group(1).rstrip("/")
    tail = "".join(seen[-10:]).strip()
    raise SimulatorStartError(tail or "no output")


def stop_process(proc: subprocess.Popen, timeout_s: float = 5.0) -> None:
    """Terminate, and kill if it has not ended within ``timeout_s``; always reaped."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def running_simulator(
    args: Sequence[str], *, timeout_s: float = START_TIMEOUT_S, cwd: str | Path | None = None
) -> Iterator[str]:
    """``start_simulator`` as a context: yields the URL; the process is gone afterwards."""
    proc, url = start_simulator(args, timeout_s=timeout_s, cwd=cwd)
    try:
        yield url
    finally:
        stop_process(proc)
