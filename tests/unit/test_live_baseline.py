"""The live session against a baseline run: the comparison per level reaches the panes' views,
the header names the run, spec decoding per level carries the break-even, diagnosis lines."""

from __future__ import annotations

import math
from dataclasses import replace

from infmon.clock import FakeClock
from infmon.engine.types import RecordBatch
from infmon.model.compare.baseline import Reference, compare_run
from infmon.model.live.session import Session
from infmon.model.steps.span import CLOSED, Level
from infmon.model.steps.step_levels import by_level
from tests.ui.fakes import ServerFeed, ended, feeder, new_session, record, window_of


def _sweep(session: Session, clock: FakeClock, spec: float | None, slow: float = 1.0) -> None:
    """Levels 1 and 4, 12 s each: records (``slow`` stretches their token gaps), windows,
    a scrape a second (speculating at acceptance ``spec``)."""
    feed, i = ServerFeed(), 0
    wiring = feeder(session, clock)
    session.set_paused(False, clock.now())
    for level in (1, 4):
        start = clock.now()
        session.apply_steps(
            session.ledger.book.begin(Level(CLOSED, level), start, "sweep", 2.0), start
        )
        index = session.ledger.book.next_index - 1
        planned = []
        for n in range(12 * level):
            r = record(i + n, 0.0, level, step=index)
            t0 = r.chunk_times_s[0]
            times = tuple(t0 + (x - t0) * slow for x in r.chunk_times_s)
            r = replace(r, chunk_times_s=times, end_s=times[-1] + 1e-4)
            planned.append(ended(r, start + (n + 0.5) / level))
        i += len(planned)
        for sec in range(12):
            t0 = clock.now()
            clock.advance(1.0)
            recs = planned[sec * level : (sec + 1) * level]
            wiring.records(RecordBatch(0, recs))
            wiring.window(window_of(recs, t0, clock.now(), level, index, streams=planned))
            wiring.snapshot(feed.scrape(clock.now(), running=level, kv=0.05 * level, spec=spec))
            session.snapshot(clock.now())


def _reference(clock: FakeClock) -> Reference:
    base = new_session(clock)
    base.method.levels.keep_requests = True  # what a reference keeps: every request's figures
    _sweep(base, clock, spec=None)
    samples = base.method.levels.samples(clock.now(), {})
    return Reference("baseline", "runs/baseline", by_level(samples), base.facts())


def test_a_slower_speculating_run_shows_deltas_break_even_and_diagnosis():
    clock = FakeClock(0.0)
    ref = _reference(clock)
    assert {lv.label for lv in ref.levels} == {"c=1", "c=4"}
    session = new_session(clock)
    session.set_reference(ref, clock.now())
    _sweep(session, clock, spec=0.3, slow=3.0)
    clock.advance(3.0)  # the live comparison is recomputed every REFRESH_S (here inline)
    now = clock.now()
    snap = session.snapshot(now)
    got = session.baseline_inputs(now)
    assert got is not None and compare_run(*got).levels == snap.baseline.levels
    assert snap.header.baseline_run == "baseline"
    assert "speculative: none → draft k=4" in snap.header.baseline_changes
    view = snap.baseline
    assert view is not None and [c.label for c in view.levels] == ["c=1", "c=4"]
    for c in view.levels:
        tpot = c.get("tpot_p50")
        assert c.in_baseline and tpot is not None
        assert tpot.delta.rel > 1.5 and tpot.delta.beyond_noise  # 3× the token gaps
    spec = {lv.label: lv for lv in snap.server.spec.levels} if snap.server.spec else {}
    assert set(spec) == {"c=1", "c=4"}
    for label, lv in spec.items():
        e = lv.economics
        assert e is not None and not e.pays
        assert e.speedup == view.at(Level(CLOSED, int(label[2:]))).get("tpot_p50").delta.base / (
            lv.tpot_p50_s
        )
        assert math.isfinite(lv.alpha)
    assert snap.knee.baseline == view.levels
    lines = [c.text for c in snap.diagnosis if "spec is" in c.text]
    assert len(lines) == 2 and all("slower than baseline" in line for line in lines)
    assert any(e.kind == "diagnosis" and "c=4: spec is" in e.text for e in snap.events)


def test_without_a_baseline_the_spec_levels_still_show_and_nothing_compares():
    clock = FakeClock(0.0)
    session = new_session(clock)
    _sweep(session, clock, spec=0.3)
    snap = session.snapshot(clock.now())
    assert snap.baseline is None and snap.header.baseline_run is None
    assert snap.server.spec is not None
    assert [lv.label for lv in snap.server.spec.levels] == ["c=1", "c=4"]
    assert all(lv.economics is None for lv in snap.server.spec.levels)
    assert session.baseline_inputs(clock.now()) is None


def test_a_failed_comparison_is_said_once_and_stops_the_comparison():
    from concurrent.futures import Future

    clock = FakeClock(0.0)
    ref = _reference(clock)
    session = new_session(clock)
    session.set_reference(ref, clock.now())

    def broken(job):
        f: Future = Future()
        f.set_exception(ValueError("boom"))
        return f

    session.method.submit = broken
    _sweep(session, clock, spec=None)
    clock.advance(3.0)
    snap = session.snapshot(clock.now())
    errors = [e.text for e in snap.events if e.kind == "error"]
    assert errors == ["baseline comparison stopped: ValueError: boom"]
    assert session.method.reference is None and snap.baseline is None
