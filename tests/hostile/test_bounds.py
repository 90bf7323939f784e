"""Unbounded input: a ``/metrics`` page that drips, one that never ends, a cardinality explosion,
SSE ``data:`` lines with no blank line, an error body that never ends.

Each run must end within its bound, with a clear line or a counted failure kind, and the
process's peak RSS (printed) stays far below what the attack would take unbounded (1.1-1.3 GB
in 20-30 s before these bounds).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, bench, error_kinds, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e
RSS_MB = 200.0
"""Peak RSS bound for a command under attack (they all peak at 55-120 MB here)."""


def _events(session: Path) -> list[dict]:
    from infmon.journal import SessionReader

    return list(SessionReader(session).iter_events())


def test_scrape_of_a_dripping_page_times_out(tmp_path: Path) -> None:
    with serve("drip-metrics") as (url, _):
        ran = run_infmon("scrape", url, "--metrics-timeout", "2s", home=tmp_path, timeout_s=30)
    assert ran.returncode == 2
    assert_clean_run(ran, RSS_MB)
    assert ran.elapsed_s < 10, "the total deadline (2 s) did not hold"
    assert "no complete answer within 2 s" in ran.stderr and len(ran.stderr.splitlines()) == 1


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_bench_finishes_while_the_page_drips(tmp_path: Path) -> None:
    """Before the deadline, bench hung for ever in its final scrape."""
    with serve("drip-metrics") as (url, _):
        ran = bench(url, tmp_path / "s", home=tmp_path, timeout_s=60)
    assert ran.returncode == 0, ran.show()
    assert_clean_run(ran, RSS_MB)
    assert "failed: timeout" in ran.stdout
    assert ran.elapsed_s < 30


def test_scrape_of_a_page_that_never_ends_is_capped(tmp_path: Path) -> None:
    with serve("endless-metrics") as (url, _):
        ran = run_infmon("scrape", url, "--metrics-max-bytes", "4MB", home=tmp_path, timeout_s=30)
        default = run_infmon("scrape", url, home=tmp_path, timeout_s=30)
    for r in (ran, default):
        assert r.returncode == 2
        assert_clean_run(r, RSS_MB)
        assert "body is over" in r.stderr and "--metrics-max-bytes" in r.stderr
    assert "4 MiB" in ran.stderr and "16 MiB" in default.stderr


def test_a_cardinality_explosion_is_rejected_once(tmp_path: Path) -> None:
    """200,000 series: `scrape` says so in one line; `bench` records one outage event, one
    line in the report, not one per scrape, and the load is unaffected."""
    with serve("many-series") as (url, srv):
        ran = run_infmon("scrape", url, home=tmp_path, timeout_s=60)
        run = bench(url, tmp_path / "s", home=tmp_path, timeout_s=90)
    assert ran.returncode == 2 and "200,000 series, over the cap of 100,000" in ran.stderr
    assert_clean_run(ran, RSS_MB)
    assert run.returncode == 0, run.show()
    assert_clean_run(run, RSS_MB)
    assert srv.scrapes >= 3
    downs = [e for e in _events(tmp_path / "s") if e.get("kind") == "server_down"]
    assert len(downs) == 1 and downs[0]["error_kind"] == "too_many_series"
    faults = (tmp_path / "s" / "report.md").read_text().split("## Faults", 1)[1]
    assert faults.count("too_many_series") == 1


def test_sse_data_lines_without_a_blank_line(tmp_path: Path) -> None:
    """Each request fails as oversized_event at 1 MiB instead of growing memory."""
    with serve("sse-no-blank") as (url, _):
        ran = bench(url, tmp_path / "s", home=tmp_path, timeout_s=60)
    assert ran.returncode == 2, ran.show()  # no request succeeded
    assert_clean_run(ran, RSS_MB)
    assert "oversized_event" in ran.stderr
    kinds = error_kinds(tmp_path / "s")
    assert kinds.get("oversized_event", 0) >= 2, kinds


def test_an_error_body_that_never_ends(tmp_path: Path) -> None:
    with serve("endless-error") as (url, _):
        ran = bench(url, tmp_path / "s", home=tmp_path, timeout_s=60)
    assert ran.returncode == 2, ran.show()
    assert_clean_run(ran, RSS_MB)
    assert ran.elapsed_s < 30
    assert error_kinds(tmp_path / "s").get("http", 0) >= 2
