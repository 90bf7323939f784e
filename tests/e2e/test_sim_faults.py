"""Simulator faults (issue 7) and timing truth (issue 8), over real HTTP."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time

import httpx
import pytest

from infmon.sim.faults import parse_fault
from tests.conftest import REPO, infmon_cmd, poll_until, running_sim

pytestmark = pytest.mark.e2e
MODEL = "Qwen/Qwen2.5-7B-Instruct"
BODY = {"model": MODEL, "prompt": "hello", "max_tokens": 20, "ignore_eos": True, "stream": True}


def test_parse_fault_forms():
    assert parse_fault("http500").rate == 0.1
    assert parse_fault("http429:2:0.5") == parse_fault("http429:2:0.5")
    f = parse_fault("stall:3:1")
    assert (f.kind, f.value, f.rate) == ("stall", 3.0, 1.0)
    assert parse_fault("restart:5").value == 5.0
    assert (parse_fault("wander:6").value, parse_fault("wander").value) == (6.0, 10.0)
    for bad in ("nope", "http500:2", "stall:x", "http500:0.1:0.2", "wander:6:0.5"):
        with pytest.raises(ValueError):
            parse_fault(bad)


def test_http_errors_and_retry_after():
    with running_sim("--fault", "http429:7:1.0") as url:
        r = httpx.post(f"{url}/v1/completions", json=BODY)
        assert r.status_code == 429 and r.headers["retry-after"] == "7"
        assert r.json()["error"]["code"] == 429
    with running_sim("--fault", "http503:1.0") as url:
        assert httpx.post(f"{url}/v1/completions", json=BODY).status_code == 503


def test_reset_mid_stream_and_abort_is_counted():
    with running_sim("--fault", "reset:1.0") as url:
        got = b""
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream("POST", f"{url}/v1/completions", json=BODY, timeout=10) as r,
        ):
            for chunk in r.iter_bytes():
                got += chunk
        assert got.startswith(b"data: {")  # the first chunk arrived, then the reset
        aborted = 'finished_reason="abort",model_name="Qwen/Qwen2.5-7B-Instruct"} 1.0'
        poll_until(lambda: aborted in httpx.get(f"{url}/metrics").text, 10, "the abort counted")


def test_stall_then_resume_and_malformed_sse():
    with running_sim("--fault", "stall:1.0:1.0") as url:
        t0 = time.perf_counter()
        r = httpx.post(f"{url}/v1/completions", json=BODY, timeout=10)
        assert time.perf_counter() - t0 > 1.0
        assert r.text.endswith("data: [DONE]\n\n")
    with running_sim("--fault", "malformed-sse:1.0") as url:
        events = httpx.post(f"{url}/v1/completions", json=BODY, timeout=10).text.split("\n\n")
        bad = [e for e in events if e.startswith("data: {") and not _is_json(e[6:])]
        assert len(bad) == 1


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def test_metrics_faults():
    with running_sim("--fault", "metrics-garbage:1.0") as url:
        assert "vllm:" not in httpx.get(f"{url}/metrics").text
    with running_sim("--fault", "metrics-truncated:1.0") as url, pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/metrics")
    with running_sim("--fault", "metrics-slow:0.5") as url:
        t0 = time.perf_counter()
        assert "vllm:num_requests_running" in httpx.get(f"{url}/metrics").text
        assert time.perf_counter() - t0 >= 0.5


def generated(url: str) -> str:
    page = httpx.get(f"{url}/metrics").text
    line = next(x for x in page.splitlines() if x.startswith("vllm:generation_tokens_total{"))
    return line[line.rindex(" ") :]


def test_restart_resets_counters():
    def counted() -> bool:  # a request, and its 20 tokens counted before the next restart
        try:
            httpx.post(f"{url}/v1/completions", json={**BODY, "stream": False}, timeout=10)
        except httpx.HTTPError:  # reset by a restart
            return False
        return generated(url) == " 20.0"

    with running_sim("--fault", "restart:1.5") as url:
        poll_until(counted, 60, "20 tokens counted between two restarts")
        poll_until(lambda: generated(url) == " 0.0", 30, "the restart's counters at zero")


def test_exit_fault_ends_the_process_that_long_into_the_load():
    proc = subprocess.Popen(
        infmon_cmd("sim", "--port", "0", "--fault", "exit:0.5"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    url = next(m.group(0) for line in proc.stdout if (m := re.search(r"http://[\d.:]+", line)))
    probe = httpx.post(f"{url}/v1/completions", json={**BODY, "max_tokens": 1}, timeout=10)
    assert probe.status_code == 200  # a one-token probe is not the load: no clock yet
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=2)
    with contextlib.suppress(httpx.HTTPError):  # the load's first request starts the clock
        httpx.post(f"{url}/v1/completions", json={**BODY, "stream": False}, timeout=10)
    assert proc.wait(timeout=60) == 70  # a deadline for its exit, not a measure of it


def test_trace_timing_joins_on_the_client_request_id(tmp_path):
    trace = tmp_path / "trace.jsonl"
    with running_sim("--trace-timing", str(trace)) as url:
        t_sent = time.perf_counter()
        r = httpx.post(
            f"{url}/v1/completions",
            json={**BODY, "max_tokens": 5},
            headers={"X-Request-Id": "client-42"},
            timeout=10,
        )
        t_done = time.perf_counter()
        assert r.headers["x-request-id"] == "client-42"
        server_id = json.loads(r.text.split("\n\n")[0][6:])["id"]
    rows = [json.loads(x) for x in trace.read_text().splitlines()]
    row = next(x for x in rows if x["client_request_id"] == "client-42")
    assert row["id"] == server_id and row["completion_tokens"] == 5
    assert len(row["chunks_s"]) == 5  # one write per step, the last with usage and [DONE]
    assert t_sent < row["received_s"] < row["chunks_s"][0] < row["chunks_s"][-1] < t_done
    assert row["chunks_s"] == sorted(row["chunks_s"])
