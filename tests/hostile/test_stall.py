"""Streams that never end and never warn (#27, finding 7).

Before, one token then ``: ping`` comments every second kept a stream open for ever (each read
reset the read timeout: after 68 s still "2 in flight · 0 failed"), and a silent stream was
unflagged until the 600 s read timeout. Now a stream with no new token for ``--stall-timeout``
is cut and fails as ``stalled``, counted and shown like any failure kind.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, bench, error_kinds
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("mode", "when"), [("ping-stall", "after its first"), ("silent-stall", "before any")]
)
def test_a_stalled_stream_is_cut_and_counted(tmp_path: Path, mode: str, when: str) -> None:
    session = tmp_path / "s"
    with serve(mode) as (url, _):
        ran = bench(
            url,
            session,
            "--stall-timeout",
            "2s",
            "--read-timeout",
            "60s",
            home=tmp_path,
            timeout_s=60,
        )
    assert ran.returncode == 2, ran.show()  # no request succeeded
    assert_clean_run(ran)
    assert f"no new token for 2s {when} token (stalled; --stall-timeout)" in ran.stderr
    assert ran.elapsed_s < 30, "the stalls were not cut at 2 s"
    kinds = error_kinds(session)
    assert kinds.get("stalled", 0) >= 2 and set(kinds) == {"stalled"}, kinds
    report = (session / "report.md").read_text()
    assert "stalled" in report
