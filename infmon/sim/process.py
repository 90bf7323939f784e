"""Run ``infmon sim`` as a child process: start it, learn its URL, always stop it.

Used by ``infmon demo`` and by the tests, so the simulator is started one way everywhere. The
child prints ``listening on http://HOST:PORT`` once it has bound ``--port 0``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

LISTEN_RE = re.compile(r"listening on (http://\S+)")
START_TIMEOUT_S = 30.0
PR_SET_PDEATHSIG = 1


class SimStartError(RuntimeError):
    """The simulator exited or stayed silent before saying where it listens."""


def _die_with_parent() -> None:
    """Child side: get SIGTERM when the parent dies, however it dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def start(args: Sequence[str], *, cwd: Path | None = None,
          timeout_s: float = START_TIMEOUT_S) -> tuple[subprocess.Popen[str], str]:  # fmt: skip
    """Start ``infmon sim --host 127.0.0.1 --port 0 ARGS``; return the process and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "infmon", "sim", "--host", "127.0.0.1", "--port", "0", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        cwd=cwd, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )  # fmt: skip
    try:
        return proc, _wait_for_url(proc, timeout_s)
    except BaseException:
        stop(proc)
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
            # keep draining its output so the pipe never fills and blocks the simulator
            threading.Thread(target=proc.stdout.read, daemon=True).start()
            return match.group(1).rstrip("/")
    tail = "".join(seen[-10:]).strip()
    raise SimStartError(f"the simulator did not start: {tail or 'no output'}")


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM, then SIGKILL after 5 s; returns once the process is gone."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def running(args: Sequence[str], *, cwd: Path | None = None,
            timeout_s: float = START_TIMEOUT_S) -> Iterator[tuple[str, subprocess.Popen[str]]]:  # fmt: skip
    """Yield ``(url, process)`` of a running simulator; it is gone when the block exits."""
    proc, url = start(args, cwd=cwd, timeout_s=timeout_s)
    try:
        yield url, proc
    finally:
        stop(proc)
