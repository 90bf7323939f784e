"""Every key binding, driven through Pilot against fakes (no timers, a fixed clock)."""

from __future__ import annotations

import inspect

from infmon.ui.commands import KEYS, system_commands
from infmon.ui.screens import HelpScreen, MarkScreen
from tests.ui.conftest import make_app
from tests.ui.fakes import record


async def test_dial_keys_change_the_driver_and_the_header(clock):
    app = make_app(clock=clock, concurrency=4)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("plus")
        assert app.concurrency == 5
        await pilot.press("minus", "minus")
        assert app.concurrency == 3
        await pilot.press("right_square_bracket")
        assert app.concurrency == 6
        await pilot.press(
            "left_square_bracket",
            "left_square_bracket",
            "left_square_bracket",
            "left_square_bracket",
        )
        assert app.concurrency == 1  # never below one stream
        calls = [c for c in app.driver.calls if c[0] == "set_concurrency"]
        assert [n for _, n in calls] == [4, 5, 4, 3, 6, 3, 1, 1, 1]
        assert app.last_snapshot.header.load_level == 1
        assert ("load", {"mode": "closed", "level": 6}) in app.recorder.actions


async def test_r_switches_to_rate_mode_and_back(clock):
    app = make_app(clock=clock, concurrency=2, rate_per_s=3.0)
    async with app.run_test() as pilot:
        await pilot.press("r")
        assert app.load_mode == "rate"
        assert app.driver.calls[-1] == ("set_rate", 3.0)
        await pilot.press("plus")
        assert app.driver.calls[-1] == ("set_rate", 4.0)
        assert app.last_snapshot.header.load_mode == "rate"
        await pilot.press("r")
        assert app.load_mode == "closed"
        assert app.driver.calls[-1] == ("set_concurrency", 2)


async def test_space_pauses_and_resumes(clock):
    app = make_app(clock=clock, start_paused=True)
    async with app.run_test() as pilot:
        assert app.last_snapshot.header.state == "paused"
        await pilot.press("space")
        assert app.driver.calls[-1] == ("resume", None)
        assert app.last_snapshot.header.state == "running"
        await pilot.press("space")
        assert app.driver.calls[-1] == ("pause", None)
        assert app.last_snapshot.header.state == "paused"


async def test_w_sweeps_doubling_each_held_step(clock):
    app = make_app(clock=clock, step_duration_s=10.0)
    async with app.run_test() as pilot:
        await pilot.press("w")
        assert app.sweep.active and app.concurrency == 1 and not app.paused
        assert app.last_snapshot.header.state == "sweeping"
        for i in range(10):
            app.session.add_record(record(i, clock.now(), 1))
            clock.advance(1.0)
        app.render_tick()
        assert app.concurrency == 2
        await pilot.press("w")
        assert not app.sweep.active
        assert any("sweep stopped" in e.text for e in app.last_snapshot.events)


async def test_m_adds_a_mark_with_a_note(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("m")
        assert isinstance(app.screen, MarkScreen)
        await pilot.press(*"FP8", "enter")
        assert not isinstance(app.screen, MarkScreen)
        assert any(e.text == "mark: FP8" for e in app.last_snapshot.events)
        assert ("mark", {"note": "FP8"}) in app.recorder.actions
        await pilot.press("m", "x", "escape")
        assert sum(e.kind == "mark" for e in app.last_snapshot.events) == 1


async def test_b_sets_the_baseline(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("b")
        assert app.last_snapshot.header.baseline_step == 0
        assert ("baseline", {"step": 0}) in app.recorder.actions


async def test_s_writes_a_report_with_the_screenshot(clock):
    app = make_app(clock=clock)
    async with app.run_test() as pilot:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        ((svg, final),) = app.recorder.reports
        assert svg.startswith("<svg") and final is False
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
        for _b, key, _a, _l, desc in KEYS:
            assert key in shown and desc in shown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_every_key_is_in_the_command_palette(clock):
    app = make_app(clock=clock)
    async with app.run_test():
        commands = list(system_commands(app))
        assert len(commands) == len(KEYS)
        assert {c.help for c in commands} == {f"key: {k[1]}" for k in KEYS}
        palette = [c.title for c in app.get_system_commands(app.screen)]
        assert "Double the load" in palette and "Write the final report and quit" in palette
        # running a palette command really acts
        result = next(c for c in commands if c.help == "key: ]").callback()
        if inspect.isawaitable(result):
            await result
        assert app.concurrency == 2


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
