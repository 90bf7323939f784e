"""The journal's typed events (``infmon.journal.events``): each one written by
``JournalWriter.write`` is the line the ad-hoc ``write_event`` dict wrote (same keys, same
order), and ``from_payload`` gives the event back from it; a line of another kind or without
its fields is None."""

from __future__ import annotations

import json
import sqlite3

import pytest

from infmon.clock import FakeClock
from infmon.journal import JournalWriter
from infmon.journal.events import (
    BaselineSet,
    BenchSummary,
    Ended,
    LevelSet,
    LoadTotals,
    Note,
    Paused,
    SearchMove,
    SearchStarted,
    StepPartial,
    TargetResolved,
)
from infmon.journal.reader import SessionReader
from infmon.model.steps.span import CLOSED, RATE
from infmon.report.fmt import mark_text

CAPS = {"stream_options": True, "vllm_fields": False, "per_request_metrics": True}
CASES = [
    (LoadTotals(10, 7, 2, 1), "load_totals", {"sent": 10, "succeeded": 7, "failed": 2, "cancelled": 1}),
    (
        StepPartial(3, "c=8", "SIGTERM", 4.2, 8.0, "measure"),
        "step_partial",
        {"index": 3, "label": "c=8", "signal": "SIGTERM", "measured_s": 4.2, "planned_s": 8.0, "phase": "measure"},
    ),
    (Note("sweep", "sweep stopped: the operator took the dial"), "sweep", {"note": "sweep stopped: the operator took the dial"}),
    (Note("mark", "FP8"), "mark", {"note": "FP8"}),
    (BaselineSet(2), "baseline", {"step": 2}),
    (BaselineSet(None), "baseline", {"step": None}),
    (LevelSet(CLOSED, 16.0, "operator"), "concurrency", {"mode": "closed", "level": 16.0, "origin": "operator"}),
    (LevelSet(RATE, 2.5, "search"), "rate", {"mode": "rate", "level": 2.5, "origin": "search"}),
    (Paused(True), "pause", {}),
    (Paused(False), "resume", {}),
    (Ended("quit", "q"), "quit", {"reason": "q"}),
    (Ended("interrupted", "SIGINT"), "interrupted", {"signal": "SIGINT"}),
    (SearchStarted("slo", 1.0, 64.0, 8), "search", {"goal": "slo", "lo": 1.0, "hi": 64.0, "budget": 8}),
    (SearchMove(12.0, "bisect"), "search_move", {"level": 12.0, "why": "bisect"}),
    (BenchSummary(None, 4), "bench_summary", {"knee": None, "slo_max_concurrency": 4}),
    (
        TargetResolved("http://a", "m", "chat", CAPS, ("http://a", "http://b")),
        "target",
        {"urls": ["http://a", "http://b"], "url": "http://a", "model": "m", "endpoint": "chat", "capabilities": CAPS},
    ),
    (TargetResolved(None, None, "completions", {}), "target", {"url": None, "model": None, "endpoint": "completions", "capabilities": {}}),
    (
        TargetResolved("http://a", "m", "chat", CAPS, (), "real-time (SCHED_RR 1)"),
        "target",
        {"load_thread": "real-time (SCHED_RR 1)", "url": "http://a", "model": "m", "endpoint": "chat", "capabilities": CAPS},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("event", "kind", "payload"), CASES)
def test_each_event_writes_the_old_line_and_reads_back(tmp_path, event, kind, payload):
    with JournalWriter(tmp_path / "new", clock=FakeClock(5.0), autoflush=False) as j:
        j.write(event)
    with JournalWriter(tmp_path / "old", clock=FakeClock(5.0), autoflush=False) as j:
        j.write_event(kind, **payload)  # as the call sites wrote it before the types
    new, old = ([_strip(e) for e in _lines(tmp_path / d)] for d in ("new", "old"))
    assert new == old  # same keys in the same order: the journal's format is unchanged
    line = next(iter(SessionReader(tmp_path / "new").iter_events()))
    assert list(line)[3:] == list(payload)
    assert type(event).from_payload(line) == event


def test_from_payload_refuses_other_kinds_and_missing_fields():
    assert LoadTotals.from_payload({"kind": "load_totals", "sent": 1}) is None
    assert LoadTotals.from_payload({"kind": "step_partial", "sent": 1, "succeeded": 1,
                                    "failed": 0, "cancelled": 0}) is None  # fmt: skip
    assert StepPartial.from_payload({"kind": "step_partial", "label": "c=1"}) is None
    assert Note.from_payload({"kind": "sweep"}) is None
    assert LevelSet.from_payload({"kind": "concurrency", "mode": "fast", "level": 2}) is None
    assert Paused.from_payload({"kind": "mark"}) is None
    assert TargetResolved.from_payload({"kind": "workload"}) is None
    assert SearchMove.from_payload({"kind": "search_move", "level": "high"}) is None


def _lines(session: object) -> list[dict]:
    db = sqlite3.connect(f"{session}/journal.sqlite")
    try:
        return [json.loads(t) for (t,) in db.execute("SELECT event FROM events ORDER BY rowid")]
    finally:
        db.close()


def _strip(line: dict) -> list[tuple[str, object]]:
    return [(k, v) for k, v in line.items() if k != "wall"]


def test_the_reports_event_lines_read_the_typed_events():
    """``mark_text`` reads a mark and a baseline back through ``from_payload``; an old
    journal's mark (its note under ``label``) still reads."""
    assert mark_text({"kind": "mark", **Note("mark", "FP8").to_payload()}) == "mark: FP8"
    assert mark_text({"kind": "mark", "label": "fp8 on"}) == "mark: fp8 on"
    assert mark_text({"kind": "baseline", **BaselineSet(3).to_payload()}) == "baseline: step 3"
    assert mark_text({"kind": "baseline", **BaselineSet(None).to_payload()}) == "baseline"
