"""bench/client_overhead.py: the clock it joins on, and its delay and throughput arithmetic."""

from __future__ import annotations

import argparse
import math

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/client_overhead.py")


def test_perf_counter_is_one_clock_across_processes(bench) -> None:
    """The server's trace and the client's records are both perf_counter: a child's reading
    falls between two readings of the parent (CLOCK_MONOTONIC on Linux)."""
    assert 0 < bench.check_clock() < 5_000


def test_delays_join_server_writes_with_client_receives(bench) -> None:
    result = {
        "requests": [
            ("a", 10.0, [10.105, 10.206, 10.309], 3),  # client TTFT 105 ms
            ("b", 20.0, [20.052, 20.060], 2),
            ("c", 30.0, [30.1], 1),  # no trace line: not joined
            ("d", 40.0, [40.1, 40.2], 2),  # chunk counts differ: not joined
        ]
    }
    trace = {
        "a": (10.001, [10.101, 10.201, 10.301]),  # server TTFT 100 ms
        "b": (20.002, [20.050, 20.058]),
        "d": (40.0, [40.1]),
    }
    d = bench.delays(result, trace)
    assert d["joined"] == 2
    # TTFT added: a = 105 - 100 = 5 ms, b = 52 - 48 = 4 ms; first chunk: 4 ms and 2 ms.
    assert d["ttft_p50_ms"] == pytest.approx(4.5) and d["first_p50_ms"] == pytest.approx(3.0)
    # Per chunk: 4, 5, 8 (a) and 2, 2 (b) ms.
    assert d["chunk_p50_ms"] == pytest.approx(4.0)
    assert d["chunk_p99_ms"] == pytest.approx(8.0, abs=0.2)


def test_nothing_joined_is_nan_not_zero(bench) -> None:
    d = bench.delays({"requests": [("x", 1.0, [1.1], 1)]}, {})
    assert d["joined"] == 0 and math.isnan(d["ttft_p50_ms"]) and math.isnan(d["chunk_p99_ms"])


def test_tokens_are_counted_inside_the_window_only(bench) -> None:
    args = argparse.Namespace()
    reqs = [
        ("a", 0.5, [0.9, 1.5, 2.5, 3.5], 8),  # 2 tokens per chunk; 2 chunks inside [1, 3]
        ("b", 2.0, [2.2, 2.4], None),
    ]  # no usage: one token per chunk
    r = bench._result(args, 1.0, 3.0, 0.5, reqs, failed=1)
    assert r["tokens"] == 2 * 2 + 2 and r["window_s"] == 2.0 and r["failed"] == 1
    assert [q[0] for q in r["requests"]] == ["b"]  # only requests sent inside the window are joined
    s = bench.summary({**r, "lag_p99_ms": 1.0}, {})
    assert s["tok_s"] == 3.0 and s["cpu_per_1k"] == pytest.approx(0.5 / 6 * 1e3)


def test_ttft_splits_into_client_send_server_read_and_client_receive(bench) -> None:
    """client TTFT = send+ + srv-read + server TTFT + 1st+, and client+ = send+ + 1st+."""
    result = {
        "requests": [("a", 10.0, [10.110, 10.2], 2), ("b", 20.0, [20.060], 1)],
        "written_s": {"a": 10.002, "b": 20.001},
    }
    trace = {
        "a": (10.007, [10.107, 10.199]),  # read 5 ms after the write; server TTFT 100 ms
        "b": (20.002, [20.056]),
    }
    d = bench.delays(result, trace)
    assert d["send_p50_ms"] == pytest.approx(1.5)  # 2 and 1 ms
    assert d["srv_read_p50_ms"] == pytest.approx(3.0)  # 5 and 1 ms
    assert d["first_p50_ms"] == pytest.approx(3.5)  # 3 and 4 ms
    assert d["client_p50_ms"] == pytest.approx(5.0)  # 2 + 3 and 1 + 4 ms
    assert d["ttft_p50_ms"] == pytest.approx(8.0)  # client+ plus srv-read: 10 and 6 ms
