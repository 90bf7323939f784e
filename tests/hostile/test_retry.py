"""Retry behaviour: ``Retry-After`` (seconds and HTTP-date) is honoured on 429/503, and a server
failing every request at once gets a backoff, not a hot loop (5,371 requests in 5 s at c=2
against one answering invalid JSON, before). The load level itself is kept."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, error_kinds, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def _bench(url: str, tmp_path: Path, concurrency: str, seconds: str) -> object:
    return run_infmon(
        "bench",
        url,
        "--session-dir",
        str(tmp_path / "s"),
        "--concurrency",
        concurrency,
        "--step-duration",
        seconds,
        "--warmup",
        "0",
        "--output-tokens",
        "4",
        "--no-server-metrics",
        home=tmp_path,
    )


def _gaps_after_refusals(log: list[tuple[float, int]]) -> list[float]:
    """For one stream (c=1): the time from each refused request to the next request."""
    return [b[0] - a[0] for a, b in itertools.pairwise(log) if a[1] in (429, 503)]


@pytest.mark.parametrize(("mode", "least_s"), [("retry-after", 1.9), ("retry-after-date", 1.5)])
def test_retry_after_is_honoured(tmp_path: Path, mode: str, least_s: float) -> None:
    """``Retry-After: 2`` (or an HTTP-date 3 s ahead, 1 s resolution): the stream waits that long
    before its next request (0.05-0.4 s before)."""
    with serve(mode) as (url, srv):
        ran = _bench(url, tmp_path, "1", "6")
    assert ran.returncode == 1, ran.show()  # some failed, the run went on
    assert_clean_run(ran)
    gaps = _gaps_after_refusals(srv.log.load)  # the load's requests, not the probes
    print(f"gaps after a refusal: {[round(g, 2) for g in gaps]}")
    assert len(gaps) >= 2 and min(gaps) >= least_s, gaps
    kinds = error_kinds(tmp_path / "s")
    assert kinds.get("http", 0) == len(gaps) or kinds.get("http", 0) == len(gaps) + 1


def test_a_server_failing_at_once_gets_a_backoff_not_a_hot_loop(tmp_path: Path) -> None:
    with serve("invalid-json") as (url, srv):
        ran = _bench(url, tmp_path, "2", "5")
    assert ran.returncode == 2, ran.show()  # no request succeeded
    assert_clean_run(ran)
    sent = len(srv.log.load)
    print(f"requests in a 5 s step at c=2: {sent}")
    # Backoff 0.05 s doubling to 1 s (with jitter ×0.5-1) per stream: ≈ 2 × (5 + 5) at most.
    assert 5 <= sent <= 40, sent
    assert error_kinds(tmp_path / "s").get("protocol", 0) >= 5
    assert "malformed SSE data (not JSON)" in ran.stderr
