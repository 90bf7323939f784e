"""Issue 26 finding 9: a replay's `?` lists the replay's keys, its knee pane does not ask to
press keys it has not got, and the "sweep stopped" event the live run said is there at its
time."""

from __future__ import annotations

import pytest

from infmon.clock import FakeClock
from infmon.commands.replay import load_replay
from infmon.journal.reader import SessionReader
from infmon.journal.writer import JournalWriter
from infmon.ui.panes import EventsPane, KneePane
from infmon.ui.replay import NO_STEP_YET, ReplayApp
from infmon.ui.screens import HelpScreen
from tests.synthetic import write_synthetic_session
from tests.ui.test_gpu_pane import text_of

STOPPED = "sweep stopped: knee at c=4; holding c=4"


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay-keys") / "session"
    write_synthetic_session(path, concurrencies=(1, 4, 16), step_duration_s=8.0)
    with SessionReader(path) as r:
        last = max(e["t"] for e in r.iter_events() if isinstance(e.get("t"), (int, float)))
    with JournalWriter(path, clock=FakeClock(last - 4.0), autoflush=False) as j:
        j.write_event("sweep", note=STOPPED)
    return path, last - 4.0


def _app(path, at_s: float | None = None) -> ReplayApp:
    replay = load_replay(path)
    at = replay.start_s if at_s is None else at_s
    return ReplayApp(replay, at, ui_hz=0, handle_signals=False, user_theme_dir=None)


async def test_help_lists_the_replay_keys_not_the_load_keys(session):
    app = _app(session[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = str(app.screen.query_one("#help-keys").render())
        assert "the previous step start or mark" in keys and "play" in keys
        assert "double the load" not in keys and "sweep" not in keys


async def test_the_knee_pane_before_any_step_says_how_to_move_on(session):
    app = _app(session[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        knee = text_of(app, KneePane)
        assert "press w" not in knee and NO_STEP_YET in knee, knee


async def test_the_sweep_stopped_event_is_replayed_at_its_time(session):
    path, at = session
    app = _app(path, at + 0.5)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert STOPPED in " ".join(text_of(app, EventsPane).split())
    before = _app(path, at - 0.5)
    async with before.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert "sweep stopped" not in text_of(before, EventsPane)
