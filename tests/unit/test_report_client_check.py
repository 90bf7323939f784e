"""The client self-check reaches the reports: a loop-lag column and diagnosis lines from the
steps' ``client_notes`` (a late client is never "Nothing notable")."""

from __future__ import annotations

import json
import math

from infmon.clock import FakeClock
from infmon.commands.monitor import LiveLoad
from infmon.journal import JournalWriter
from infmon.model.records import RequestRecord
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
    doc = {"steps": [_step(1, [], 2.0), _step(64, [late], 215.0)]}
    lines = diagnosis.lines(doc)
    assert lines == [f"c=64: client self-check: {late} (the client may be the bottleneck)."]
    assert diagnosis.lines({"steps": [_step(1, [], 2.0)]}) == []


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


class _Driver:
    def __init__(self) -> None:
        self.step, self.lag_s, self.since, self.area_s = 0, 0.2, [], 0.0

    def inflight_area_s(self) -> float:
        return self.area_s

    def next_step(self) -> int:
        self.step += 1
        return self.step

    def loop_lag_p99_s(self, since_s: float | None = None) -> float:
        self.since.append(since_s)
        return self.lag_s

    def set_concurrency(self, n: int) -> None:
        pass


class _Journal:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def write_event(self, kind: str, **payload) -> None:
        self.events.append((kind, payload))


def test_the_monitor_journals_each_steps_loop_lag():
    clock, driver, journal = FakeClock(10.0), _Driver(), _Journal()
    live = LiveLoad(driver, None, None, clock, 64, journal)
    live.ready = True
    live.set_concurrency(4)
    clock.advance(5.0)
    driver.area_s = 19.0  # 3.8 streams in flight on average over the 5 s
    live.set_concurrency(8)
    driver.lag_s = math.nan
    live.end_step()  # at once: no time held, nothing measured
    live.end_step()  # no step running: nothing more
    ends = [p for k, p in journal.events if k == "step_end"]
    assert ends == [
        {"index": 1, "stats": {"achieved_concurrency": 3.8, "loop_lag_p99_ms": 200.0}},
        {"index": 2, "stats": {"achieved_concurrency": None, "loop_lag_p99_ms": None}},
    ]
    assert driver.since == [10.0, 15.0]


def _rec(i: int, step: int, sent: float) -> RequestRecord:
    chunks = tuple(sent + 0.05 + 0.01 * k for k in range(8))
    return RequestRecord(i, sent, chunks, chunks[-1], output_tokens=8, step=step, concurrency=2)


def test_a_step_without_records_does_not_shift_the_others_self_check(tmp_path):
    """The monitor starts step 1 paused (no records), then steps 2 and 3 (3 still running)."""
    clock = FakeClock(100.0)
    with JournalWriter(tmp_path, clock=clock, autoflush=False) as j:
        j.write_config({"url": "http://x"})
        j.write_event("step_start", index=1, mode="closed", level=1)
        j.write_event("step_end", index=1, stats={"loop_lag_p99_ms": 1.0})
        j.write_event("step_start", index=2, mode="closed", level=2)
        for i in range(4):
            j.write_record(_rec(i, 2, 100.0 + i))
        j.write_event("step_end", index=2, stats={"loop_lag_p99_ms": 80.0})
        for i in range(4, 8):
            j.write_record(_rec(i, 3, 100.0 + i))
    write_reports(tmp_path)
    steps = json.loads((tmp_path / "report.json").read_text())["steps"]
    assert [(s["step"], s["loop_lag_p99_ms"], s["complete"]) for s in steps] == [
        (2, 80.0, True),
        (3, None, False),
    ]
