"""The client self-check reaches the reports: a loop-lag column and diagnosis lines from the
steps' ``client_notes`` (a late client is never "Nothing notable")."""

from __future__ import annotations

import json

from infmon.clock import FakeClock
from infmon.journal import JournalWriter
from infmon.model.records.request import RequestRecord
from infmon.report import diagnosis, write_reports
from infmon.report.fmt import STEP_HEADER, step_row
from tests.synthetic import write_synthetic_session


def _step(c: int, notes: list[str], lag_ms: float | None) -> dict:
    return {
        "concurrency": c,
        "client_notes": notes,
        "loop_lag_p99_ms": lag_ms,
        "achieved_concurrency": float(c),
    }


def test_diagnosis_states_each_client_note():
    late = "event-loop lag p99 215 ms: client timestamps are late"
    lines = diagnosis.lines(None, None, [_step(1, [], 2.0), _step(64, [late], 215.0)])
    assert lines == [f"c=64: client self-check: {late} (the client may be the bottleneck)."]
    assert diagnosis.lines(None, None, [_step(1, [], 2.0)]) == []


def test_step_row_has_the_loop_lag_column():
    i = STEP_HEADER.index("loop lag p99 ms")
    assert STEP_HEADER[i - 1] == "achieved c"
    assert step_row(_step(8, [], 12.345))[i] == "12.3"
    assert step_row(_step(8, [], None))[i] == "—"


def test_reports_show_a_late_client(tmp_path):
    write_synthetic_session(
        tmp_path, concurrencies=(2, 64), step_duration_s=3, loop_lag_ms_per_stream=3.0
    )
    write_reports(tmp_path)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    doc = json.loads((tmp_path / "report.json").read_text())
    assert [s["loop_lag_p99_ms"] for s in doc["steps"]] == [6.0, 192.0]
    late = "c=64: client self-check: event-loop lag p99 192 ms: client timestamps are late"
    assert "Nothing notable" not in md
    for text in (md, html):
        assert "loop lag p99 ms" in text and "192.0" in text and late in text


def _rec(i: int, step: int, sent: float) -> RequestRecord:
    chunks = tuple(sent + 0.05 + 0.01 * k for k in range(8))
    return RequestRecord(i, sent, chunks, chunks[-1], output_tokens=8, step=step, concurrency=2)


def test_a_step_without_records_does_not_shift_the_others_self_check(tmp_path):
    """The monitor starts step 1 paused (no records), then steps 2 and 3 (3 still running)."""
    clock = FakeClock(100.0)
    with JournalWriter(tmp_path, clock=clock, autoflush=False) as j:
        j.write_config({"url": "http://x"})
        begin = {"mode": "closed", "origin": "operator", "warmup_s": 0.0}
        j.write_event("step_begin", t=99.0, index=1, level=1, **begin)
        j.write_event("step_pause", t=99.0, index=1)
        j.write_event("step_end", t=99.5, index=1, stats={"loop_lag_p99_ms": 1.0})
        j.write_event("step_begin", t=99.5, index=2, level=2, **begin)
        for i in range(4):
            j.write_record(_rec(i, 2, 100.0 + i))
        j.write_event("step_end", t=104.0, index=2, stats={"loop_lag_p99_ms": 80.0})
        j.write_event("step_begin", t=104.0, index=3, level=4, **begin)
        for i in range(4, 8):
            j.write_record(_rec(i, 3, 100.0 + i))
    write_reports(tmp_path)
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert [(s["step"], s["loop_lag_p99_ms"], s["complete"]) for s in steps] == [
        (2, 80.0, True),
        (3, None, False),
    ]


def test_a_cause_seen_in_many_steps_is_one_diagnosis_line_naming_them() -> None:
    """Issue 17, finding 5: the event-loop lag note of 17 steps was 17 lines."""
    from infmon.report.diagnosis import lines

    steps = [
        {
            "concurrency": 2**i,
            "client_notes": [f"event-loop lag p99 {100 + 10 * i} ms: client timestamps are late"],
            "server": {"waiting_max": float(i) if i > 2 else 0.0},
        }
        for i in range(8)
    ]
    out = lines(None, None, steps)
    lag = [x for x in out if "event-loop lag" in x]
    assert lag == [
        "c=1 … c=128 (8 steps): client self-check: event-loop lag p99 170 ms: client timestamps "
        "are late (the client may be the bottleneck)."
    ]
    assert [x for x in out if "queued" in x] == [
        "c=8 … c=128 (5 steps): requests queued on the server (waiting up to 7)."
    ]


def test_a_lost_worker_is_a_diagnosis_line_not_only_a_fault() -> None:
    """Issue 31, finding 7: a lost worker was under Faults while Diagnosis said "Nothing
    notable"; the step it failed in now names it."""
    lost = {**_step(8, [], None), "errors_by_kind": {"worker_lost": 4}}
    clean = {**_step(8, [], None), "errors_by_kind": {}}
    assert diagnosis.lines(None, None, [lost, clean]) == [
        "c=8: a load worker was lost: 4 streams failed with it and the level was re-split "
        "over the others (see Faults and the caveats)."
    ]
