"""The reported sweep, replayed: levels 1 … 1024 on a server capped at 256 streams, the sweep
holding c=256 after it stops, a pause, then a quit with streams in flight.

Everything but the load engine is real: the controller and its dial, the Session and its step
ledger, the journal on disk, the report rebuilt offline. The live knee pane, report.md,
report.json and `infmon report` must name the same knee, and the header must say 0 failed and
the cancelled streams as cancelled.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from infmon.clock import FakeClock
from infmon.commands.live import LiveController
from infmon.commands.wiring import RunWiring, wire_session
from infmon.engine.types import RecordBatch
from infmon.journal import JournalWriter
from infmon.model.live.dial import DialState, LoadDial
from infmon.model.live.session import Session, SessionConfig
from infmon.model.records.measures import SLO
from infmon.model.steps.span import CLOSED
from infmon.report import write_reports
from tests.conftest import REPO, infmon_cmd
from tests.enginekit.fluid import FluidServer
from tests.ui.fakes import RecordingEngine


def run_sweep(session_dir: Path, step_s: float = 8.0):
    clock = FakeClock(1000.0)
    journal = JournalWriter(session_dir, clock, autoflush=False)
    journal.write_config({"url": "http://fluid", "slo": {"ttft_s": None}, "label": "replay"})
    session = Session(
        SessionConfig(endpoint="http://fluid", slo=SLO(), step_warmup_s=0.8), start_s=clock.now()
    )
    wiring = wire_session(RunWiring(journal, session.ledger, session.health), session, clock)
    dial = LoadDial(DialState(CLOSED, 1, 1.0, paused=True), step_s=step_s)
    ctl = LiveController(RecordingEngine(), session, wiring, journal, dial, clock, warmup_s=0.8)  # type: ignore[arg-type]
    server = FluidServer()
    book = session.ledger.book

    def step_at(t: float) -> int:
        return next((s.index for s in book.latest_started_by(t)), 1)

    def second() -> None:
        t0 = clock.now()
        level = dial.state.concurrency
        if dial.state.paused:
            clock.advance(1.0)
            return
        cur = book.current
        warm = cur.segments[-1].measure_from_s if cur else t0
        recs, window, snap = server.second(t0, level, step_at, warm)
        clock.advance(1.0)
        wiring.records(RecordBatch(0, recs))
        wiring.window(window)
        wiring.snapshot(snap)
        ctl.tick()

    ctl.start()
    ctl.press("sweep")
    screen_during = []
    while dial.sweeping:
        second()
        screen_during.append(session.snapshot(clock.now()).knee)
    held = dial.state.concurrency
    for _ in range(20):
        second()
    ctl.press("pause")
    for _ in range(10):
        second()
    ctl.press("pause")
    for _ in range(10):
        second()
    ctl.end()
    cancelled = server.cancel_inflight(clock.now(), dial.state.concurrency, book.steps[-1].index)
    wiring.records(RecordBatch(0, cancelled))
    for _ in range(3):  # the worker's last windows: nothing in flight
        t0 = clock.now()
        clock.advance(0.25)
        _, window, _ = server.second(t0, 0, step_at, t0)
        wiring.window(window)
    screen = session.snapshot(clock.now())
    journal.write_event("quit", reason="quit")
    journal.close()
    return screen, held, len(cancelled), screen_during


def test_screen_reports_and_offline_report_name_the_same_knee(tmp_path: Path) -> None:
    session_dir = tmp_path / "session"
    screen, held, n_cancelled, during = run_sweep(session_dir)
    knee = screen.knee
    # while it swept, the pane named no knee before the server showed one
    named = [k.knee_level for k in during if k.knee_level is not None]
    assert named and set(named) == {256}
    print(f"live knee c={knee.knee_level} ({knee.knee_reason}); held c={held}")
    assert knee.knee_level == 256 and knee.knee_confirmed and held == 256
    assert "running capped at 256 while 256 wait at c=512" in knee.knee_reason
    assert max(p.level for p in knee.steps) == 512  # the sweep stopped one level past the knee
    assert any(p.revisit_of is not None and p.level == 256 for p in knee.steps)
    assert screen.header.failed == 0 and screen.header.cancelled == n_cancelled > 0
    # every step on screen settled: its figures are the report's
    assert all(p.settled for p in knee.steps)

    write_reports(session_dir)
    doc = json.loads((session_dir / "report.json").read_text())
    assert doc["knee"]["concurrency"] == 256 and doc["knee"]["reason"] == knee.knee_reason
    assert doc["session"]["failed"] == 0 and doc["session"]["cancelled"] == n_cancelled
    md = (session_dir / "report.md").read_text()
    assert f"**Knee:** c=256 ({knee.knee_reason})" in md
    live = {p.index: p.output_tokens_per_s for p in knee.steps}
    for s in doc["steps"]:
        if s["step"] in live and s["level"].startswith("c="):
            assert abs(s["output_throughput_tok_s"] - live[s["step"]]) < 1e-6 * live[s["step"]]

    out = tmp_path / "offline"
    r = subprocess.run(
        infmon_cmd("report", str(session_dir), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    offline = json.loads((out / "report.json").read_text())
    assert offline["knee"] == doc["knee"] and offline["steps"] == doc["steps"]
