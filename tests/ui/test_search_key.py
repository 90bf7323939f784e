"""``w`` in a monitor started with ``--search slo``: the key runs the load search (not the
doubling sweep); the header shows its progress, the knee pane its probes (one point per level)
and the frontier it found (the SLO limit), the hint line the verdict. The server is the fluid
closed-loop model in virtual time: TPOT = 18 ms + 0.5 ms × c meets 30.25 ms up to c=24."""

from __future__ import annotations

from infmon.commands.wiring import wire_session
from infmon.engine.types import RecordBatch
from infmon.model.records.measures import SLO
from infmon.model.search.live_search import LiveSearch
from infmon.model.search.policy import SearchSpec
from infmon.ui.panes.base import Body
from infmon.ui.panes.knee import KneePane
from tests.enginekit.fluid import FluidServer
from tests.ui.conftest import make_app
from tests.ui.fakes import new_session

SLO_ = SLO(tpot_s=0.03025)
SPEC = SearchSpec(goal="slo", lo=4, hi=128, resolution=0.05, budget=12)


async def test_w_runs_the_search_and_the_knee_pane_shows_its_probes_and_frontier(clock):
    session = new_session(clock, SLO_)
    app = make_app(session, clock, controller_kw={"step_s": 8.0})
    ctl = app.controller
    ctl.new_search = lambda: LiveSearch(SPEC, SLO_, 8.0)
    wiring = wire_session(ctl.wiring, session, clock)
    server, book = FluidServer(per_seq_tpot_s=0.0005), session.ledger.book

    def second() -> None:
        t0, cur = clock.now(), book.current
        warm = cur.segments[-1].measure_from_s if cur else t0
        step_at = lambda t: next((s.index for s in book.latest_started_by(t)), 1)  # noqa: E731
        recs, window, snap = server.second(t0, ctl.dial.state.concurrency, step_at, warm)
        clock.advance(1.0)
        wiring.records(RecordBatch(0, recs))
        wiring.window(window)
        wiring.snapshot(snap)
        ctl.tick()

    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("w")
        assert ctl.search is not None and not ctl.dial.sweeping and not ctl.paused
        app.render_tick()
        assert app.last_snapshot.header.sweep == "search 1/12 · c=4 · measuring"
        assert app.last_snapshot.header.state == "searching"
        for _ in range(600):
            if ctl.search is None:
                break
            second()
        assert ctl.search is None
        app.render_tick()
        await pilot.pause()
        snap = app.last_snapshot
        line = next(p["line"] for k, p in ctl.journal.events if k == "search_verdict")
        assert line.startswith("SLO frontier (tpot≤30.25ms for 90% of requests): c=24 (")
        assert snap.header.hint == line and snap.header.sweep is None
        assert snap.knee.slo_limit_level == 24 and ctl.dial.state.concurrency == 24
        probed = [p["level"] for k, p in ctl.journal.events if k == "search_move"]
        assert {p.level for p in snap.knee.steps} == set(probed)  # every probe a point
        pane = app.query_one(KneePane)
        body = pane.query_one(Body).last_text
        assert body is not None and "SLO limit c=24" in body.plain
