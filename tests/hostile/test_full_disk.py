"""A broken disk (#27, finding 3): the session's disk fills mid-run and stays full.

Before, the rows held in memory were dropped at exit with status 0: the journal and report
held a quarter of what the server completed. Now the whole record is saved to a private
directory on another disk (``$TMPDIR``) and the report is built from it; when that disk is
full too, the count of lost records is said on stderr and the status is 3.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd
from tests.e2e.test_disk_full import fill, small_tmpfs
from tests.hostile.kit import clean_env
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def _bench_onto_a_disk_that_fills(srv, url: str, disk: Path, tmpdir: Path, home: Path) -> tuple:
    session = disk / "session"
    args = (
        *("bench", url, "--session-dir", str(session), "--concurrency", "4"),
        *("--step-duration", "5", "--warmup", "0", "--output-tokens", "8"),
        *("--prompt-tokens", "8", "--no-server-metrics"),
    )
    proc = subprocess.Popen(
        infmon_cmd(*args),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(home, TMPDIR=str(tmpdir)),
    )
    try:
        deadline = time.monotonic() + 30
        while _completed(srv) < 40 and time.monotonic() < deadline:  # some reach the disk
            time.sleep(0.05)
        assert (session / "journal.sqlite").exists()
        fill(disk)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(out, err)
    return proc.returncode, out, err


def _completed(srv) -> int:
    return sum(1 for _, status in srv.log.load if status == 200)


def test_held_records_are_saved_elsewhere_and_reported(tmp_path: Path) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    with small_tmpfs(tmp_path / "disk", "1m") as disk, serve("benign") as (url, srv):
        rc, out, err = _bench_onto_a_disk_that_fills(srv, url, disk, tmpdir, tmp_path)
        completed = _completed(srv)
    assert "Traceback" not in err
    assert rc == 0, err
    m = re.search(r"saved to (\S+)", err)
    assert m and "disk full since" in err, err
    rescued = Path(m.group(1))
    assert rescued.parent == tmpdir and rescued.stat().st_mode & 0o777 == 0o700
    assert f"session recorded in {rescued}" in out
    from infmon.journal import SessionReader

    journal = sum(1 for _ in SessionReader(rescued).iter_records())
    report = json.loads((rescued / "report.json").read_text())
    reported = sum(s["completed"] + s["failed"] for s in report["steps"])
    assert completed > 50
    assert journal >= 0.99 * completed, (journal, completed)
    assert reported >= 0.99 * completed, (reported, completed)
    md = (rescued / "report.md").read_text()
    assert md.index("saved to") < md.index("## "), "the report says it first"


def test_records_written_nowhere_are_counted_and_fail_the_run(tmp_path: Path) -> None:
    with (
        small_tmpfs(tmp_path / "disk", "1m") as disk,
        small_tmpfs(tmp_path / "tmp", "64k") as tmpdir,
        serve("benign") as (url, srv),
    ):
        fill(tmpdir)
        rc, _out, err = _bench_onto_a_disk_that_fills(srv, url, disk, tmpdir, tmp_path)
    assert "Traceback" not in err
    m = re.search(
        r"infmon: error: journal: disk full since [\d:]+.*?([\d,]+) records could not", err
    )
    assert m, err
    assert int(m.group(1).replace(",", "")) > 0
    assert rc == 3, err
