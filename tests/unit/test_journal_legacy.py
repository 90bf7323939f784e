"""Old sessions (JSON lines, written by infmon before the SQLite journal) still report the same."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess

import pytest

from infmon.journal import JournalWriter, SessionReader
from infmon.report import write_reports
from tests.conftest import FIXTURES, REPO, infmon_cmd

OLD = FIXTURES / "sessions" / "jsonl-v1"


@pytest.fixture
def old_session(tmp_path):
    dst = tmp_path / "old"
    shutil.copytree(OLD, dst)
    return dst


def _close(a, b, path=""):
    """Equal, floats to 1e-9 relative (a sum may now be taken in another order); a report may
    have gained keys since (a step's prompt lengths, a session's cancelled count), never lost
    one."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() >= b.keys(), path
        for k in b:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), path
    else:
        assert a == b, path


def test_an_old_session_reports_what_the_old_version_reported(old_session):
    reader = SessionReader(old_session)
    assert reader.format == "jsonl"
    write_reports(old_session)
    doc = json.loads((old_session / "report.json").read_text())
    old = json.loads((FIXTURES / "sessions" / "jsonl-v1.report.json").read_text())
    doc["session"]["dir"] = old["session"]["dir"]  # the fixture was written as "s"
    # the old version counted a request cancelled at the end as failed (issue 13): now apart
    assert doc["session"]["failed"] + doc["session"]["cancelled"] == old["session"]["failed"]
    assert doc["session"]["cancelled"] == 1
    old["session"]["failed"] = doc["session"]["failed"]
    # the client timeline now counts output tokens when their chunks arrived, not when their
    # request finished (issue 26 finding 12): the same tokens, in other bins
    new_tok = [p.pop("out_tok_s") for p in doc["timeline"]]
    old_tok = [p.pop("out_tok_s") for p in old["timeline"]]
    assert sum(new_tok) == pytest.approx(sum(old_tok), rel=1e-6)
    assert new_tok != old_tok
    for key in ("steps", "session", "knee", "slo_max_concurrency", "server", "timeline", "events"):
        _close(doc[key], old[key], key)
    assert doc["session"]["skipped_lines"] == 1  # the torn last line
    rows = list(csv.DictReader((old_session / "requests.csv").open(newline="")))
    old_rows = list(
        csv.DictReader((FIXTURES / "sessions" / "jsonl-v1.requests.csv").open(newline=""))
    )
    assert len(rows) == len(old_rows) == 93
    for new, was in zip(rows, old_rows, strict=True):
        for key, value in was.items():
            if key == "finish_reason" and value.startswith("="):
                assert new[key] == "'" + value  # now defused as a formula
            elif value and value.replace(".", "").isdigit() and "." in value:
                assert math.isclose(float(new[key]), float(value), abs_tol=1.5e-6), key
            else:
                assert new[key] == value, key


def test_the_report_command_detects_the_format(old_session, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        infmon_cmd("report", str(old_session), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "report.json").read_text())["session"]["requests"] == 93


def test_a_newer_infmon_appends_to_an_old_session(old_session):
    """``infmon quality --session-dir OLD`` adds a SQLite journal beside the JSON lines."""
    with JournalWriter(old_session, autoflush=False) as j:
        j.write_quality({"accuracy": 1.0, "probes": 48})
    reader = SessionReader(old_session)
    assert reader.format == "jsonl+sqlite"
    assert reader.quality == {"accuracy": 1.0, "probes": 48}
    assert reader.config["label"] == "synthetic"
    kinds = [e["kind"] for e in reader.iter_events()]
    assert kinds[-2:] == ["quality", "session_end"] and "mark" in kinds
    assert len(reader.read_columns()) == 93
