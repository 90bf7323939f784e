"""Every key binding, driven through Pilot against fakes (no timers, a fixed clock)."""

from __future__ import annotations

import inspect

import pytest
from textual import events

from infmon.ui.commands import KEYS, system_commands
from infmon.ui.screens import HelpScreen, MarkScreen
from tests.ui.conftest import make_app


def levels(app) -> list[tuple[str, float]]:
    return [
        (m, v)
        for name, (_, m, v) in (
            (c[0], c[1]) for c in app.controller.engine.calls if c[0] == "set_level"
        )
    ]


async def test_dial_keys_change_the_engine_the_steps_and_the_header(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 4, "paused": False})
    async with app.run_test(size=(120, 40)) as pilot:
        for key in ("plus", "minus", "minus", "right_square_bracket"):
            clock.advance(2.0)  # held past the coalescing window: each press is a step
            await pilot.press(key)
        for _ in range(4):
            clock.advance(2.0)
            await pilot.press("left_square_bracket")
        assert [v for _, v in levels(app)] == [4, 5, 4, 3, 6, 3, 1, 1, 1]
        assert app.last_snapshot.header.load_level == 1  # never below one stream
        book = app.session.ledger.book
        assert [s.level.value for s in book.steps] == [4, 5, 4, 3, 6, 3, 1, 1, 1]
        assert book.steps[2].revisit_of == 1  # back at c=4
        journal = app.controller.journal.events
        assert ("concurrency", {"mode": "closed", "level": 6, "origin": "operator"}) in journal
        assert [k for k, _ in journal].count("step_begin") == 9


async def test_quick_presses_coalesce_into_one_step(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 4, "paused": False})
    async with app.run_test() as pilot:
        clock.advance(5.0)
        await pilot.press("plus", "plus", "plus")  # within a second
        assert [s.level.value for s in app.session.ledger.book.steps] == [4, 7]


async def test_r_switches_to_rate_mode_and_back(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 2, "rate": 3.0})
    async with app.run_test() as pilot:
        await pilot.press("r")
        assert levels(app)[-1] == ("rate", 3.0)
        await pilot.press("plus")
        assert levels(app)[-1] == ("rate", 4.0)
        assert app.last_snapshot.header.load_mode == "rate"
        await pilot.press("r")
        assert levels(app)[-1] == ("closed", 2)


async def test_rate_steps_below_one_request_per_second(clock):
    app = make_app(clock=clock, controller_kw={"mode": "rate", "rate": 1.0})
    async with app.run_test() as pilot:
        await pilot.press("minus", "minus", "minus", "minus", "plus", "plus")
        assert [v for _, v in levels(app)] == [1.0, 0.5, 0.2, 0.1, 0.1, 0.2, 0.5]


async def test_space_pauses_and_resumes_and_paused_time_is_not_measured(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        assert app.last_snapshot.header.state == "paused"
        await pilot.press("space")
        assert app.controller.engine.calls[-1] == ("resume", None)
        assert app.last_snapshot.header.state == "running"
        clock.advance(10.0)
        await pilot.press("space")
        assert app.controller.engine.calls[-1] == ("pause", None)
        assert app.last_snapshot.header.state == "paused"
        clock.advance(100.0)
        span = app.session.ledger.book.steps[-1]
        assert span.measured_s(clock.now()) == pytest.approx(10.0 - 2.0)  # minus the warm-up


async def test_w_sweeps_doubling_each_held_step(clock):
    app = make_app(clock=clock, controller_kw={"step_s": 10.0})
    async with app.run_test() as pilot:
        await pilot.press("w")
        ctl = app.controller
        assert ctl.dial.sweeping and levels(app)[-1] == ("closed", 1) and not ctl.paused
        app.render_tick()
        assert app.last_snapshot.header.state == "sweeping"
        for _ in range(11):  # 10 s of measured time: after the 2 s warm-up
            clock.advance(1.0)
            ctl.tick()
        assert levels(app)[-1] == ("closed", 1)
        clock.advance(1.0)
        ctl.tick()
        assert levels(app)[-1] == ("closed", 2)
        app.render_tick()
        assert app.last_snapshot.header.sweep == "sweep 2/11 · c=2 · 10 s left"
        await pilot.press("w")
        assert not ctl.dial.sweeping
        assert any("sweep stopped" in e.text for e in app.last_snapshot.events)


async def test_m_adds_a_mark_with_a_note(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("m")
        assert isinstance(app.screen, MarkScreen)
        await pilot.press(*"FP8", "enter")
        assert not isinstance(app.screen, MarkScreen)
        assert any(e.text == "mark: FP8" for e in app.last_snapshot.events)
        assert ("mark", {"note": "FP8"}) in app.controller.journal.events
        await pilot.press("m", "x", "escape")
        assert sum(e.kind == "mark" for e in app.last_snapshot.events) == 1


async def test_b_sets_the_baseline(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("b")
        assert app.last_snapshot.header.baseline_step == 1
        assert ("baseline", {"step": 1}) in app.controller.journal.events


async def test_s_writes_a_report_with_the_screenshot(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        (svg,) = app.recorder.reports
        assert svg.startswith("<svg")
        assert app.reports_written == [app.recorder.path]
        app.render_tick()
        assert any("report written" in e.text for e in app.last_snapshot.events)


async def test_t_cycles_the_themes(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        seen = {app.theme}
        for _ in range(len(app.theme_names)):
            await pilot.press("t")
            seen.add(app.theme)
        assert {"infmon-dark", "infmon-light", "infmon-contrast"} <= seen
        assert app.theme == "infmon-dark"


async def test_q_quits_after_keeping_the_screenshot(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert app.exit_reason == "quit"
    assert app.final_screenshot_svg and app.final_screenshot_svg.startswith("<svg")


async def test_ctrl_c_quits_like_q(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("ctrl+c")
    assert app.exit_reason == "quit" and app.final_screenshot_svg


async def test_question_mark_lists_every_key(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = str(app.screen.query_one("#help-keys").render())
        for k in KEYS:
            assert k.shown in shown and k.description in shown
        for key in "rmbt":  # the keys a newcomer could not find
            assert f"{key}  " in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_the_palette_has_infmon_commands_only(clock):
    app = make_app(clock=clock)
    async with app.run_test():
        commands = list(system_commands(app))
        assert len(commands) == len(KEYS)
        assert {c.help for c in commands} == {f"key: {k.shown}" for k in KEYS}
        palette = [c.title for c in app.get_system_commands(app.screen)]
        assert "Double the load" in palette and "Write the final report and quit" in palette
        assert palette == [c.title for c in commands]  # no Textual Quit, Screenshot, Theme…
        assert not any(t in palette for t in ("Quit", "Screenshot", "Theme", "Keys"))
        result = next(c for c in commands if c.help == "key: ]").callback()
        if inspect.isawaitable(result):
            await result
        assert levels(app)[-1] == ("closed", 2)


def footer_text(app) -> str:
    return " ".join(f"{k.key_display} {k.description}".strip() for k in app.query("FooterKey"))


async def test_the_footer_is_worded_for_the_state_and_shows_every_key_with_room(clock):
    app = make_app(clock=clock, controller_kw={"step_s": 10.0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        footer = footer_text(app)
        assert "space start" in footer and "w sweep" in footer
        for k in KEYS:  # 120 columns: every key but the anatomy view's (from 131 columns)
            assert (f"{k.shown} " in footer) == (k.action != "toggle_anatomy"), k.shown
        await pilot.press("space")
        await pilot.pause()
        assert "space pause" in footer_text(app)
        await pilot.press("space")
        await pilot.pause()
        assert "space resume" in footer_text(app)
        await pilot.press("w")
        await pilot.pause()
        assert "w stop sweep" in footer_text(app) and "space pause" in footer_text(app)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        narrow = footer_text(app)
        assert "? help" in narrow and "q quit" in narrow and "space pause" in narrow
        assert "t theme" not in narrow
        theme = app.theme
        await pilot.press("t")  # not in the footer at 80 columns, and still works
        assert app.theme != theme


async def test_the_footer_follows_the_state_while_the_terminal_is_blurred(clock):
    """A browser page without the keyboard (``infmon serve`` in a background tab or a headless
    browser) tells the app it is blurred; the key row still follows the state and the width."""
    app = make_app(clock=clock, controller_kw={"step_s": 10.0})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.post_message(events.AppBlur())
        await pilot.pause()
        assert not app.app_focus and "space start" in footer_text(app)
        # no key press (a key would give the app focus back): the palette's command
        result = next(c for c in system_commands(app) if c.help == "key: space").callback()
        if inspect.isawaitable(result):
            await result
        await pilot.pause()
        assert not app.app_focus and "space pause" in footer_text(app)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert "q quit" in footer_text(app) and "t theme" not in footer_text(app)


async def test_quit_stops_the_load_inside_the_loop_first(clock):
    stopped = []

    async def on_shutdown():
        stopped.append(True)

    app = make_app(clock=clock, on_shutdown=on_shutdown)
    async with app.run_test() as pilot:
        await pilot.press("q")
    assert stopped == [True]


async def test_a_signal_quits_like_q(clock):
    app = make_app(clock=clock)
    async with app.run_test():
        app._on_signal("SIGHUP")
    assert app.exit_reason == "SIGHUP" and app.final_screenshot_svg
