"""``infmon export`` and the journal read by tools that are not infmon (csv, sqlite3)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
from collections import Counter

import pytest

from infmon.journal import JournalWriter
from infmon.model.records.request import RequestRecord
from infmon.report import write_reports
from infmon.report.csvout import safe_cell
from tests.conftest import REPO, infmon_cmd
from tests.synthetic import write_synthetic_session


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "s"
    write_synthetic_session(path, concurrencies=(2, 4, 8), step_duration_s=5, warmup_s=1.0)
    with JournalWriter(path, autoflush=False) as j:  # a failure and a formula from the server
        j.write_record(RequestRecord(90_000, 105.0, (), 105.2, error_kind="http", step=1))
        j.write_record(
            RequestRecord(90_001, 105.1, (105.2, 105.3), 105.31, finish_reason="=1+1", step=1)
        )
    write_reports(path)
    return path


def _report(session):
    return json.loads((session / "report.json").read_text())


def _export(session, *args):
    proc = subprocess.run(
        infmon_cmd("export", str(session), *args), cwd=REPO, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def test_csv_export_read_by_the_stdlib_gives_the_reports_step_counts(session):
    rows = list(csv.DictReader(io.StringIO(_export(session, "--csv"))))
    completed = Counter(int(r["step"]) for r in rows if r["ok"] == "1" and r["warmup"] == "0")
    failed = Counter(int(r["step"]) for r in rows if r["ok"] == "0" and r["warmup"] == "0")
    steps = _report(session)["steps"]
    assert len(steps) == 3
    assert {s["step"]: s["completed"] for s in steps} == dict(completed)
    assert {s["step"]: s["failed"] for s in steps if s["failed"]} == dict(failed)
    assert len(rows) == _report(session)["session"]["requests"]
    assert "'=1+1" in {r["finish_reason"] for r in rows}


def test_the_journal_opened_with_sqlite3_gives_the_reports_figures(session):
    db = sqlite3.connect(f"file:{session / 'journal.sqlite'}?mode=ro", uri=True)
    counts = dict(
        db.execute(
            "SELECT step, count(*) FROM requests WHERE ok AND NOT warmup GROUP BY step"
        ).fetchall()
    )
    ttft = dict(
        db.execute(
            "SELECT step, avg(ttft_ms) FROM requests WHERE ok AND NOT warmup GROUP BY step"
        ).fetchall()
    )
    for s in _report(session)["steps"]:
        assert counts[s["step"]] == s["completed"]
        assert ttft[s["step"]] == pytest.approx(s["ttft_ms"]["mean"], abs=1e-6)
    config = json.loads(db.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    assert config["label"] == "synthetic" and "sk-never-written" not in json.dumps(config)


def test_step_and_time_filters(session):
    one = [json.loads(line) for line in _export(session, "--jsonl", "--step", "1").splitlines()]
    assert one and {r["step"] for r in one} == {1}
    assert len(one[0]["chunk_offsets_us"]) == one[0]["chunks"]
    window = [
        json.loads(line)
        for line in _export(session, "--jsonl", "--since", "2", "--until", "3").splitlines()
    ]
    assert window and all(2 <= r["sent_s"] < 3 for r in window)
    everything = _export(session, "--jsonl").splitlines()
    assert len(everything) > len(window)


def test_parquet_says_how_to_get_it(session):
    proc = subprocess.run(
        infmon_cmd("export", str(session), "--parquet"), cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "duckdb" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "text, cell",
    [
        ('=HYPERLINK("http://x")', '"\'=HYPERLINK(""http://x"")"'),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", '"\'\rx"'),
        ("length", "length"),
        ("a,b", '"a,b"'),
    ],
)
def test_cells_that_a_spreadsheet_would_run_are_defused(text, cell):
    assert safe_cell(text) == cell
    [[back]] = list(csv.reader([cell]))
    assert back == ("'" + text if text[0] in "=+-@\t\r" else text)


def test_since_and_until_take_seconds_or_a_wall_clock_time():
    import time

    from infmon.commands import CliError
    from infmon.commands.export import parse_time

    wall = time.mktime((2026, 12, 1, 12, 0, 30, 0, 0, -1))  # the session started 12:00:30
    assert parse_time("90", 1000.0, wall) == 1090.0
    assert parse_time("12:03", 1000.0, wall) == pytest.approx(1150.0)
    assert parse_time("12:03:41.5", 1000.0, wall) == pytest.approx(1191.5)
    assert parse_time(None, 1000.0, wall) is None
    for bad in ("noon", "1:2:3:4", "12:x"):
        with pytest.raises(CliError):
            parse_time(bad, 1000.0, wall)
