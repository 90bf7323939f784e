"""Shared fixtures. ``sim_url`` runs the real simulator in a subprocess (no mocks)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = next(
    (p / "shared" for p in REPO.parents if (p / "shared" / "fixtures").is_dir()),
    REPO.parent / "shared",
)
"""The team's shared folder: beside the checkout (CI, main) or above a worktree."""
FIXTURES = SHARED / "fixtures"
LISTEN_RE = re.compile(r"listening on (http://\S+)")


def infmon_cmd(*args: str) -> list[str]:
    """The command line that runs this checkout's infmon (no console script needed)."""
    return [sys.executable, "-m", "infmon", *args]


@contextmanager
def running_sim(*args: str, timeout_s: float = 30.0) -> Iterator[str]:
    """Start ``infmon sim --port 0 ARGS`` and yield its base URL; always stops it."""
    proc = subprocess.Popen(
        infmon_cmd("sim", "--port", "0", *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = LISTEN_RE.search(line)
            if m:
                url = m.group(1).rstrip("/")
                break
        if url is None:
            raise RuntimeError("simulator did not start:\n" + "".join(lines))
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    """A baseline simulator shared by the whole test session."""
    with running_sim("--scenario", "baseline", "--seed", "1") as url:
        yield url


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES
