"""Fixtures for the real-server suite: each server starts once per session and always stops.

Plain vLLM lives for the whole session; the spec-decoding vLLM and `transformers serve` are
used by one module each, so they are module-scoped (started once, stopped when that module ends).

The cached environment and the tiny model are built by ``scripts/real_servers.py setup``
(``.ci/real-servers.sh`` runs it first); here they are only built when missing.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real.harness import REPO, Tmux, complete, rs


@pytest.fixture(scope="session")
def real_setup() -> tuple[Path, Path]:
    started = time.monotonic()
    venv, model = rs.setup()
    print(f"\n[real] cached env {venv}, model {model} ({time.monotonic() - started:.1f}s)")
    return venv, model


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="session")
def vllm(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    """Plain vLLM (CPU, tiny model), warmed by one request.

    ``INFMON_REAL_VLLM_URL`` points the suite at a vLLM already running (serving ``tiny-gpt2``,
    e.g. from ``python scripts/real_servers.py serve-vllm``) instead of starting one.
    """
    if os.environ.get("INFMON_REAL_VLLM_URL"):
        yield rs.Server("vllm", os.environ["INFMON_REAL_VLLM_URL"].rstrip("/"), -1, server_logs)
        return
    with rs.serve_vllm(server_logs) as server:
        complete(server.url, "warm up", max_tokens=4)
        yield server


@pytest.fixture(scope="module")
def vllm_spec(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    """vLLM with ngram speculative decoding."""
    with rs.serve_vllm(server_logs, spec=True) as server:
        yield server


@pytest.fixture(scope="module")
def transformers_server(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    """`transformers serve` with the tiny model forced (no /metrics, no [DONE], strict fields).

    Its /v1/models lists only hub-cached models (none here), so tests pass ``--model``.
    """
    with rs.serve_transformers(server_logs) as server:
        yield server


@pytest.fixture
def tui(tmp_path: Path) -> Iterator:
    """Start ``infmon monitor URL …`` in a private tmux session: ``tui(url, *extra)`` returns
    ``(tmux, session_dir)``. Teardown kills the tmux session, then checks that the monitor and
    every process under it are gone; any that are not are SIGKILLed and the test fails."""
    started: list[Tmux] = []

    def start(url: str, *extra: str) -> tuple[Tmux, Path]:
        tmux = Tmux(f"infmon-real-{len(started)}", tmp_path)
        started.append(tmux)
        session = tmp_path / "session"
        tmux.start(["env", f"PYTHONPATH={REPO}", *monitor_cmd(url, session, *extra)], cwd=tmp_path)
        return tmux, session

    yield start
    leftovers = {pid for tmux in started for pid in tmux.close()}
    if leftovers:
        pytest.fail(
            f"processes outlived their tmux session and were SIGKILLed: {sorted(leftovers)}"
        )


def monitor_cmd(url: str, session: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "infmon",
        "monitor",
        url,
        "--session-dir",
        str(session),
        "--concurrency",
        "2",
        "--prompt-tokens",
        "32",
        "--output-tokens",
        "32",
        *extra,
    ]
