"""The session directory's faults: unwritable or read-only, in use by another process, a disk
that fills up mid-run (rows held in memory, counted, shown), bounded scrapes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from infmon.clock import FakeClock
from infmon.journal import JournalWriter, SessionDirError, SessionReader, check_session_dir
from infmon.journal.scrapes import ScrapeBudget
from infmon.model.records.request import RequestRecord
from infmon.report import write_reports
from tests.conftest import REPO, infmon_cmd

ROOT = os.geteuid() == 0


def _rec(i: int) -> RequestRecord:
    return RequestRecord(i, 100.0 + i, (100.1 + i, 100.2 + i), 100.3 + i, (1, 1), 4, 2, step=0)


@pytest.mark.skipif(ROOT, reason="root writes through directory permissions")
def test_an_unwritable_session_dir_is_one_line(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(SessionDirError) as exc:
            check_session_dir(locked / "session")
        assert "not writable" in str(exc.value) and "\n" not in str(exc.value)
    finally:
        locked.chmod(0o700)


def test_bench_on_an_unusable_session_dir_fails_before_any_load(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    proc = subprocess.run(
        infmon_cmd("bench", "http://127.0.0.1:9", "--session-dir", str(not_a_dir / "s")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "not writable" in proc.stderr, proc.stderr


def test_a_second_writer_is_refused_and_a_dead_owners_lock_is_taken_over(tmp_path):
    first = JournalWriter(tmp_path, autoflush=False)
    try:
        with pytest.raises(SessionDirError) as exc:
            JournalWriter(tmp_path, autoflush=False)
        assert f"in use by pid {os.getpid()}" in str(exc.value)
        child = subprocess.run(
            [sys.executable, "-c", _OPEN, str(tmp_path)], capture_output=True, text=True
        )
        assert child.returncode == 3 and "in use by pid" in child.stdout
    finally:
        first.close()
    killed = subprocess.run([sys.executable, "-c", _OPEN_AND_DIE, str(tmp_path)])
    assert killed.returncode == -9
    assert (tmp_path / "infmon.lock").read_text().strip().isdigit()  # its pid is still there
    with JournalWriter(tmp_path, autoflush=False) as j:  # the kernel released its lock
        j.write_record(_rec(1))
    assert (tmp_path / "infmon.lock").read_text() == ""


_OPEN = """
import sys
from infmon.journal import JournalWriter, SessionDirError
try:
    JournalWriter(sys.argv[1], autoflush=False)
except SessionDirError as exc:
    print(exc)
    sys.exit(3)
"""
_OPEN_AND_DIE = """
import os, signal, sys
from infmon.journal import JournalWriter
j = JournalWriter(sys.argv[1], autoflush=False)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_failing_disk_holds_rows_counts_them_and_says_so(tmp_path):
    clock = FakeClock(0.0)
    j = JournalWriter(tmp_path, clock=clock, autoflush=False, held_budget=5)
    j.write_record(_rec(0))
    j.flush()
    assert j.status().ok and j.status().line() is None

    def full(*args, **kwargs):
        raise __import__("sqlite3").OperationalError("database or disk is full")

    db = j._dbs[0]
    j._dbs[0] = type("Full", (), {"execute": full, "executemany": full, "close": db.close})()
    for i in range(1, 9):
        j.write_record(_rec(i))
        j.flush()
        clock.advance(0.5)
    status = j.status()
    assert status.errors == 4  # tried at 0.5, 1.5, 3.5 s after the first failure at 0.0 s
    assert status.error == "disk full" and status.held_records == 5 and status.dropped_records == 3
    assert status.line().startswith("journal: disk full since ")
    assert status.line().endswith("5 records held in memory, 3 dropped (over the memory budget)")
    j._dbs[0] = db  # the disk has room again: the held rows go out at the next try
    j.write_record(_rec(9))
    j.flush()
    assert j.status().held_records == 5  # not yet (the next try is due at 7.5 s); at budget
    assert j.status().dropped_records == 4
    clock.advance(4.0)
    j.flush()
    assert j.status().error is None and j.status().held_records == 0
    j.close()
    ids = [r.request_id for r in SessionReader(tmp_path).iter_records()]
    assert ids == [0, 5, 6, 7, 8, 9]


def test_label_cardinality_explosion_is_bounded(tmp_path):
    """A new label set per scrape (200k engines): the journal grows by a bounded row."""
    budget = ScrapeBudget(budget_bytes=20_000, raw_max_bytes=100_000)
    page = "vllm:num_requests_running 3\n" * 100_000
    # 200k engine objects made once and relabelled in place each scrape: every scrape still
    # brings 200k label sets never seen before (the writer keeps no reference to a snapshot),
    # without making 6M dicts for the garbage collector to walk
    engines = [{"labels": {"pod": ""}, "running": i} for i in range(200_000)]
    with JournalWriter(tmp_path, autoflush=False, scrape_budget=budget) as j:
        for t in range(0, 300, 10):
            for i, engine in enumerate(engines):
                engine["labels"]["pod"] = f"p{t}-{i}"
            snap = {"timestamp_s": float(t), "running": 3, "engines": engines, "state": "ok"}
            j.write_scrape(snap, raw_page=page)
    db = tmp_path / "journal.sqlite"
    assert db.stat().st_size < 1_000_000, db.stat().st_size
    scrapes = list(SessionReader(tmp_path).iter_scrapes())
    assert 5 <= len(scrapes) < 30 and all(s["snap"]["running"] == 3 for s in scrapes)
    assert scrapes[0]["snap"]["items_cut"] == 200_000 - budget.max_items
    pages = list(SessionReader(tmp_path).iter_scrape_pages())
    assert len(pages) == 5 and all(truncated for _, truncated, _ in pages)


def test_scrapes_are_deduplicated_and_replayed_whole(tmp_path):
    cfg = {"block_size": "16", "cache_dtype": "auto"}
    with JournalWriter(tmp_path, autoflush=False) as j:
        for t in range(130):
            snap = {"timestamp_s": float(t), "running": t % 7, "cache_config": cfg}
            if t == 70:
                snap["cache_config"] = {**cfg, "block_size": "32"}
            j.write_scrape(snap)
    rows = list(SessionReader(tmp_path).shards()[0].execute("SELECT keyframe, snap FROM scrapes"))
    with_config = [json.loads(s) for _, s in rows if "cache_config" in json.loads(s)]
    assert len(with_config) == 5  # t=0 (keyframe), 60 (keyframe), 70, 71 (changed), 120
    back = list(SessionReader(tmp_path).iter_scrapes())
    assert [s["snap"]["cache_config"]["block_size"] for s in back] == ["16"] * 70 + ["32"] + [
        "16"
    ] * 59
    assert [s["snap"]["running"] for s in back] == [t % 7 for t in range(130)]


def test_reports_of_an_unwritable_session_go_to_a_printed_fallback(tmp_path, monkeypatch):
    from tests.synthetic import write_synthetic_session

    session = tmp_path / "s"
    write_synthetic_session(session, concurrencies=(2,), step_duration_s=2)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    import infmon.report as report

    def refuse(path):
        raise SessionDirError(path, "not writable (no space left on device)")

    monkeypatch.setattr("infmon.journal.store.check_session_dir", refuse)
    written = report.write_reports(session)
    private = written[0].parent
    assert private.parent == tmp_path / "tmp" and private.name.startswith("infmon-reports-s-")
    assert private.stat().st_mode & 0o777 == 0o700
    assert "Reports written to" in (written[0].parent / "report.md").read_text()
    assert write_reports  # the public name stays importable
