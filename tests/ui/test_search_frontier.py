"""The live frontier chart (issue 29, must show 1): with ``--search``, ``w`` runs the search and
the knee pane draws its frontier beside a narrowed table: each probe a point of tok/s per user
against total output tok/s (``●`` meets the SLO, ``×`` misses it), the TPOT bound as a line.
The footer and ``?`` say "search", not "sweep". The server is the fluid closed-loop model in
virtual time: TPOT = 18 ms + 0.5 ms × c meets 30.25 ms (33.1 tok/s per user) up to c=24."""

from __future__ import annotations

from infmon.commands.wiring import wire_session
from infmon.engine.types import RecordBatch
from infmon.model.records.measures import SLO
from infmon.model.search.frontier import frontier_chart
from infmon.model.search.live_search import LiveSearch
from infmon.model.search.policy import SearchSpec
from infmon.ui.panes.base import Body
from infmon.ui.panes.knee import KneePane
from infmon.ui.screens import HelpScreen
from tests.enginekit.fluid import FluidServer
from tests.ui.conftest import make_app
from tests.ui.fakes import new_session
from tests.ui.test_keys import footer_text

SLO_ = SLO(tpot_s=0.03025)
SPEC = SearchSpec(goal="slo", lo=4, hi=128, resolution=0.05, budget=12)


def searching_app(clock, goal: str = "slo"):
    session = new_session(clock, SLO_)
    app = make_app(session, clock, controller_kw={"step_s": 8.0})
    ctl = app.controller
    ctl.new_search = lambda: LiveSearch(SPEC, SLO_, 8.0)
    session.set_search(goal)  # as build_monitor says it for --search
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

    return app, ctl, second


def frontier_body(app) -> Body:
    return app.query_one(KneePane).query_one("#knee-frontier", Body)


async def shown(app, pilot) -> str:
    app.render_tick()
    await pilot.pause()
    body = frontier_body(app)
    return body.last_text.plain if body.display and body.last_text is not None else ""


async def test_the_knee_pane_draws_the_search_frontier_live_at_each_size(clock):
    app, ctl, second = searching_app(clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        assert ctl.search is not None
        while ctl.search is not None and len(ctl.search.probes) < 3:
            second()
        text = await shown(app, pilot)  # live, mid-search: the probes so far
        assert text.startswith("frontier · ● meets  × misses  ─ TPOT 33.1/s"), text
        assert "output tok/s" in text and "c=4" in text, text
        assert text.count("●") - 1 + text.count("×") - 1 == 3, text  # the key has one of each
        for _ in range(600):
            if ctl.search is None:
                break
            second()
        assert ctl.search is None
        text = await shown(app, pilot)
        view = ctl.session.snapshot(clock.now()).knee.frontier
        assert view.verdict.startswith("SLO frontier (tpot≤30.25ms for 90% of requests): c=24")
        points = view.points
        assert len(points) >= 5 and {p.meets for p in points} == {True, False}
        plot = text.split("\n", 1)[1]  # below the key: the model's chart, as laid out there
        body = frontier_body(app)
        chart = frontier_chart(view, body.size.width, body.size.height - 1)
        assert chart is not None and plot.split("\n") == list(chart.lines)
        assert 1 <= plot.count("●") <= sum(p.meets for p in points)
        assert 1 <= plot.count("×") <= sum(not p.meets for p in points)
        assert chart.lines[chart.bound_row].count("─") >= 20 and "c=4" in plot
        pane = app.query_one(KneePane)
        assert pane.query_one("#knee-table", Body).size.width <= 24  # the table narrowed
        assert frontier_body(app).size.width >= 40  # 120×40: the chart beside it
        await pilot.resize_terminal(200, 60)
        text = await shown(app, pilot)
        assert "● meets" in text and "output tok/s, all users" in text
        assert frontier_body(app).size.width >= 55
        await pilot.resize_terminal(130, 38)  # a resize alone, no new snapshot: the chart fills
        await pilot.pause()  # its own box, line for line, the x axis' title its last line
        body = frontier_body(app)
        lines = body.last_text.plain.split("\n")
        assert len(lines) == body.size.height and "output tok/s" in lines[-1], lines
        await pilot.resize_terminal(80, 24)  # compact: no room, the probes in one line
        assert await shown(app, pilot) == ""
        table = app.query_one(KneePane).query_one("#knee-table", Body).last_text.plain
        assert "search slo: c=4● c=8●" in table.replace("\n", " "), table
        await pilot.resize_terminal(120, 40)
        await pilot.press("plus")  # the operator moves: the knee's own chart comes back
        assert await shown(app, pilot) == ""
        assert app.last_snapshot.knee.frontier is None


async def test_w_says_search_in_the_footer_the_hint_and_help_with_search(clock):
    app, _ctl, _second = searching_app(clock)
    async with app.run_test(size=(120, 40)) as pilot:
        app.render_tick()
        await pilot.pause()
        footer = footer_text(app)
        assert "w search slo" in footer and "sweep" not in footer, footer
        assert "w searches for the SLO frontier" in app.last_snapshot.header.hint
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("#help-keys").render())
        assert "search for the SLO frontier (--search slo)" in help_text
        assert "automatic sweep" not in help_text
        await pilot.press("escape")
        await pilot.press("w")
        app.render_tick()
        await pilot.pause()
        assert "w stop search" in footer_text(app), footer_text(app)
        await pilot.press("w")  # stopped: the chart stays, saying so
        app.render_tick()
        await pilot.pause()
        assert "w search slo" in footer_text(app)
        assert app.last_snapshot.knee.frontier.verdict == "search stopped by the operator"


async def test_without_search_w_still_says_sweep(clock):
    app = make_app(clock=clock, controller_kw={"step_s": 10.0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert "automatic sweep" in str(app.screen.query_one("#help-keys").render())
        await pilot.press("escape")
        assert "w sweep" in footer_text(app) and "search" not in footer_text(app)
