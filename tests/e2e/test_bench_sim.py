"""`infmon bench` against the real simulator: the Must-show run of issue 2, shortened."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd

pytestmark = pytest.mark.e2e


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_bench_sweep_against_the_simulator(sim_url: str, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    r = subprocess.run(
        infmon_cmd(
            "bench",
            sim_url,
            "--concurrency",
            "1,4,16,64",
            "--step-duration",
            "3",
            "--warmup",
            "0.5",
            "--output-tokens",
            "32",
            "--json",
            str(out),
            "--session-dir",
            str(tmp_path / "s"),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["schema"] == "infmon.bench/1"
    steps = data["steps"]
    assert [s["concurrency"] for s in steps] == [1, 4, 16, 64]
    assert all(s["failed"] == 0 and s["completed"] > 0 and not s["tokens_estimated"] for s in steps)
    tput = [s["output_throughput_tok_s"] for s in steps]
    assert tput[1] > 2 * tput[0]  # decode is memory-bound: throughput grows with concurrency
    assert all(
        abs(s["achieved_concurrency"] - s["concurrency"]) < 0.15 * s["concurrency"] for s in steps
    )


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_a_steps_tok_s_is_the_servers_own_rate_over_the_same_window(sim_url, tmp_path) -> None:
    """Issue 13, must show 5: c=64, 10 s steps. The client counts the tokens whose chunks
    arrived inside the measured window (warm-up requests' too), so its figure matches the
    server's generation counter scraped at the window's edges (it read 6–11 % low when it
    counted only the measured requests' tokens)."""
    out = tmp_path / "out.json"
    r = subprocess.run(
        infmon_cmd(
            "bench",
            sim_url,
            "--concurrency",
            "64,64",
            "--step-duration",
            "10",
            "--json",
            str(out),
            "--session-dir",
            str(tmp_path / "s"),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    for s in json.loads(out.read_text())["steps"]:
        client, server = s["output_throughput_tok_s"], s["server_generation_tok_s"]
        print(
            f"c=64: client {client:.1f} tok/s, server {server:.1f} tok/s "
            f"over {s['server_window_s']:.2f} s ({client / server - 1:+.2%})"
        )
        assert abs(client / server - 1) < 0.02
        assert abs(s["server_window_s"] - s["measured_s"]) < 0.5
