"""Shared fixtures. ``sim_url`` runs the real simulator in a subprocess (no mocks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

from infmon.sim.launch import running_simulator

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
"""Real captures the tests read (each with its ``.source.txt``); a fresh clone has them all."""


SYSTEM_TOOLS = ("tmux", "chromium", "prometheus")
"""The Debian tools some tests drive. Without one, those tests are skipped and say how to
install it; under CI (``CI`` set: ``.ci/run`` installs them) a missing one fails the run."""


def system_tool(name: str) -> str:
    """The path of ``name`` (one of ``SYSTEM_TOOLS``); the test is skipped without it."""
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(
            f"{name} is not installed (apt-get install {name}: CI installs and requires it)"
        )
    return exe


def pytest_sessionstart(session: pytest.Session) -> None:
    """Under CI every system tool must be there: a skipped browser test is not a pass."""
    missing = [t for t in SYSTEM_TOOLS if shutil.which(t) is None]
    if os.environ.get("CI") and missing:
        pytest.exit(f"CI is set and {', '.join(missing)} not installed (.ci/run installs them)", 1)


def default_sigint() -> None:
    """``preexec_fn`` for a child that is sent SIGINT: a suite started in the background
    (``nohup … &``) ignores SIGINT, every child inherits that, and Python then never raises
    KeyboardInterrupt: the child gets the default back, as from a terminal."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


T = TypeVar("T")


def poll_until(
    probe: Callable[[], T | bool | None],
    timeout_s: float,
    what: str,
    proc: subprocess.Popen | None = None,
    interval_s: float = 0.05,
) -> T:
    """Call ``probe`` until it returns something truthy (returned) or ``timeout_s`` passes
    (the test fails, saying ``what`` it waited for). With ``proc``, fail as soon as it exits:
    the condition can no longer come. The way a test waits for what it can observe, never a
    fixed sleep."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = probe()
        if got:
            return got  # type: ignore[return-value]
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"waiting for {what}: the process exited with {proc.returncode}")
        if time.monotonic() >= deadline:
            pytest.fail(f"{what}: not seen within {timeout_s:g} s")
        time.sleep(interval_s)


def infmon_cmd(*args: str) -> list[str]:
    """The command line that runs this checkout's infmon (no console script needed)."""
    return [sys.executable, "-m", "infmon", *args]


@contextmanager
def running_sim(*args: str, timeout_s: float = 30.0) -> Iterator[str]:
    """Start ``infmon sim --port 0 ARGS`` and yield its base URL; always stops it."""
    with running_simulator(["--port", "0", *args], timeout_s=timeout_s, cwd=REPO) as url:
        yield url


@pytest.fixture(scope="session")
def sim_url() -> Iterator[str]:
    """A baseline simulator shared by the whole test session."""
    with running_sim("--scenario", "baseline", "--seed", "1") as url:
        yield url


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


TIERS = {"unit": "unit", "golden": "unit", "ui": "ui", "hostile": "hostile", "e2e": "e2e"}
"""A test's tier marker, by its directory under tests/ (``pytest -m unit``: see the README)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with its directory's tier (before ``-m`` selects)."""
    tests = REPO / "tests"
    for item in items:
        parts = item.path.relative_to(tests).parts
        if len(parts) > 1 and parts[0] in TIERS:
            item.add_marker(TIERS[parts[0]])
