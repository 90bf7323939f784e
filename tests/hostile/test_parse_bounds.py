"""Pages that are cheap to send and costly to parse (#27, finding 5).

Before, the 5 s deadline covered the read, not the parse, and the parser is quadratic in the
labels of a series: one series with 256k labels (3 MB) took 62 s, ``bench`` (5 s steps) took
29.6 s and said "0 scrapes, failed: none"; 16 KiB of gzip inflating to blank lines took 6.6 s
and 240 MB. Now the page's shape is checked before parsing and the parse has a deadline: a
failed scrape with its reason (``too_complex``), counted and shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, bench, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e
RSS_MB = 200.0


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("many-labels", "a line of 2,960,"),
        ("blank-gzip", "page has 16,777,217 lines, over the cap of 410,000"),
        ("wide-labels", "parsing took too long"),
    ],
)
def test_scrape_of_a_costly_page_fails_fast_with_its_reason(
    tmp_path: Path, mode: str, reason: str
) -> None:
    with serve(mode) as (url, _):
        ran = run_infmon("scrape", url, "--metrics-timeout", "2s", home=tmp_path, timeout_s=30)
    assert ran.returncode == 2, ran.show()
    assert_clean_run(ran, RSS_MB)
    assert reason in ran.stderr, ran.stderr
    assert len(ran.stderr.splitlines()) == 1
    assert ran.elapsed_s < 20, "the parse was not bounded (it took 62 s before)"


def test_bench_counts_and_shows_the_failed_scrapes(tmp_path: Path) -> None:
    with serve("many-labels") as (url, srv):
        ran = bench(url, tmp_path / "s", home=tmp_path, timeout_s=60)
    assert ran.returncode == 0, ran.show()
    assert_clean_run(ran, RSS_MB)
    assert srv.scrapes >= 3
    assert f"failed: too_complex {srv.scrapes}" in ran.stdout or "failed: too_complex" in ran.stdout
    assert "server metrics unusable" in ran.stdout
    assert ran.elapsed_s < 30
    faults = (tmp_path / "s" / "report.md").read_text().split("## Faults", 1)[1]
    assert "too_complex" in faults
