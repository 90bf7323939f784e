"""The disk fills up mid-run (#14): ``infmon bench`` goes on, holds the journal's rows in memory,
finishes, saves the whole record to a private directory in ``$TMPDIR`` (#27) and its report,
built from there, says how many were held and where it is."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str = "2m") -> Iterator[Path]:
    path.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(
            "mounting a tmpfs needs root (CAP_SYS_ADMIN), which this machine does not give: "
            + (proc.stderr.strip() or f"mount exited {proc.returncode}")
        )
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> None:
    """Take every free block of ``disk``."""
    with open(disk / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    with contextlib.suppress(OSError), open(disk / "filler-2", "wb") as f:  # the last bytes
        while True:
            f.write(b"\0" * 512)
            f.flush()


def test_a_disk_that_fills_mid_run(tmp_path):
    fallback_root = tmp_path / "tmp"
    fallback_root.mkdir()
    with small_tmpfs(tmp_path / "disk") as disk, running_sim("--seed", "2") as url:
        session = disk / "session"
        proc = subprocess.Popen(
            infmon_cmd(
                "bench",
                url,
                "--concurrency",
                "16",
                "--step-duration",
                "8",
                "--warmup",
                "0",
                "--output-tokens",
                "4",
                "--no-server-metrics",
                "--session-dir",
                str(session),
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "TMPDIR": str(fallback_root), "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + 30
            while not (session / "journal.sqlite").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(2.0)  # some records on disk, then the disk is full
            fill(disk)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    print(out, err)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    m = re.search(
        r"journal: disk full since \d\d:\d\d:\d\d, the session's record \(([\d,]+) records "
        r"held in memory included\) saved to (\S+)",
        err,
    )
    assert m, err
    held = int(m.group(1).replace(",", ""))
    assert held > 0
    where = re.search(r"reports: report\.md, report\.html in (\S+)", out)
    assert where, out
    reports = Path(where.group(1))
    assert reports.parent == fallback_root and reports.name.startswith("infmon-reports-session-")
    assert reports.stat().st_mode & 0o777 == 0o700
    assert reports == Path(m.group(2))  # the whole record and its reports, together
    md = (reports / "report.md").read_text()
    assert f"with the {held:,} records the session directory refused" in md


def test_a_read_only_disk(tmp_path):
    """``bench`` refuses it on one line before any load; ``report`` writes to the fallback."""
    from tests.synthetic import write_synthetic_session

    fallback_root = tmp_path / "tmp"
    fallback_root.mkdir()
    env = {**os.environ, "TMPDIR": str(fallback_root)}
    with small_tmpfs(tmp_path / "disk") as disk:
        write_synthetic_session(disk / "old", concurrencies=(2,), step_duration_s=2)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        bench = subprocess.run(
            infmon_cmd("bench", "http://127.0.0.1:9", "--session-dir", str(disk / "new")),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        report = subprocess.run(
            infmon_cmd("report", str(disk / "old")),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert bench.returncode == 2 and bench.stderr.count("\n") == 1, bench.stderr
    assert "read-only file system" in bench.stderr and "Traceback" not in bench.stderr
    assert report.returncode == 0, report.stderr
    written = [Path(line) for line in report.stdout.splitlines()]
    (private,) = {p.parent for p in written}
    assert private.parent == fallback_root and private.name.startswith("infmon-reports-old-")
    assert "Reports written to" in (private / "report.md").read_text()
