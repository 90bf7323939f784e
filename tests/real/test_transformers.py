"""Against `transformers serve`, the strict server: no 422s, no [DONE], no /metrics."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.real.harness import explain, infmon, rs
from tests.real.test_tui import quit_cleanly

pytestmark = pytest.mark.real_server


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_bench_against_transformers_serve(
    transformers_server: rs.Server, tmp_path: Path, endpoint: str
) -> None:
    log_before = transformers_server.log_path.read_text(errors="replace")
    out = tmp_path / "out.json"
    proc = infmon(
        "bench",
        transformers_server.url,
        "--model",
        str(rs.model_dir()),
        "--endpoint",
        endpoint,
        "--concurrency",
        "1,2",
        "--step-duration",
        "6s",
        "--warmup",
        "1s",
        "--prompt-tokens",
        "16",
        "--output-tokens",
        "16",
        "--json",
        str(out),
        "--session-dir",
        str(tmp_path / "session"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, explain(proc)
    new_log = transformers_server.log_path.read_text(errors="replace")[len(log_before) :]
    # At most one 422: the one probe that tells infmon this server refuses vLLM's extra fields;
    # every measured request is sent without them.
    rejected = [line for line in new_log.splitlines() if " 422 " in line]
    assert len(rejected) <= 1, "\n".join(rejected[:5])
    data = json.loads(out.read_text())
    for step in data["steps"]:
        # The stream ends without [DONE]: the request still completes, with its tokens.
        assert step["failed"] == 0 and step["completed"] >= 2, step
        assert step["output_throughput_tok_s"] > 0 and step["ttft_ms"]["p50"] > 0, step
    errors = [line for line in proc.stderr.splitlines() if "metrics" in line.lower()]
    assert len(errors) <= 1, f"an error storm about /metrics: {errors[:5]}"


def test_tui_shows_no_server_metrics(transformers_server: rs.Server, tui) -> None:
    tmux, _ = tui(transformers_server.url, "--model", str(rs.model_dir()))
    tmux.wait_for(
        lambda s: "no server metrics" in s.lower(), timeout_s=60, what='"no server metrics"'
    )
    time.sleep(5)  # a few scrape intervals: the message must stay put, not become a storm
    screen = tmux.screen()
    assert "Traceback" not in screen and "waiting for the first scrape" not in screen, screen
    noisy = [line for line in screen.splitlines() if "404" in line or "error" in line.lower()]
    assert len(noisy) <= 1, "\n".join(noisy)
    print(f"\nTUI against transformers serve:\n{screen}")
    quit_cleanly(tmux)
