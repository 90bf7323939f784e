"""Issue 26 finding 8: the footer says what the state is: a paused load with the server down
says "space start" as its hint does, the footer under ``?`` during a sweep still says "stop
sweep", and rate mode offers the way back ("r closed loop")."""

from __future__ import annotations

from infmon.model.server.snapshot import SourceState, unavailable
from infmon.ui.screens import HelpScreen
from tests.ui.conftest import make_app
from tests.ui.fakes import deliver, new_session
from tests.ui.test_keys import footer_text


async def test_server_down_and_paused_the_footer_says_start_like_the_hint(clock):
    session = new_session(clock)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        clock.advance(5.0)
        deliver(session, unavailable(5.0, SourceState.DOWN, "connect", "refused"), 5.0)
        app.render_tick()
        await pilot.pause()
        assert app.last_snapshot.header.state == "server down"
        assert "space starts" in (app.last_snapshot.header.hint or "")
        assert "space start" in footer_text(app) and "space pause" not in footer_text(app)


async def test_help_open_during_a_sweep_keeps_the_footer_of_the_sweep(clock):
    app = make_app(clock=clock, controller_kw={"step_s": 10.0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        await pilot.pause()
        assert "w stop sweep" in footer_text(app)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        clock.advance(1.0)
        app.render_tick()
        await pilot.pause()
        footer = footer_text(app)
        assert "space start" not in footer and "w sweep" not in footer, footer


async def test_rate_mode_offers_closed_loop(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 2, "rate": 3.0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "r rate mode" in footer_text(app)
        await pilot.press("r")
        await pilot.pause()
        assert app.last_snapshot.header.load_mode == "rate"
        assert "r closed loop" in footer_text(app) and "r rate mode" not in footer_text(app)
