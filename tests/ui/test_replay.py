"""`infmon replay`: the monitor on a recorded session, with a time cursor (issue 17, must
show 5). Each moment the panes show is checked against the journal itself, read with
``SessionReader``: the level of the step running then, the client tok/s over the ten seconds
before the cursor (from the records' chunk times), the server's running count of the last
scrape before it, and no event from after it."""

from __future__ import annotations

import re

import numpy as np
import pytest

from infmon.commands.replay import load_replay
from infmon.journal.reader import SessionReader
from infmon.ui.panes import EventsPane, HeaderBar, HintBar, ServerPane, ThroughputPane
from infmon.ui.replay import ReplayApp
from tests.synthetic import write_synthetic_session


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    session = tmp_path_factory.mktemp("replay") / "session"
    write_synthetic_session(session, concurrencies=(1, 4, 16), step_duration_s=12.0)
    with SessionReader(session) as r:
        records = list(r.iter_records())
        begins = [(e["t"], e["level"]) for e in r.iter_events() if e.get("kind") == "step_begin"]
        scrapes = [(s["t"], s["snap"].get("running")) for s in r.iter_scrapes()]
    return session, records, begins, scrapes


def _text(app, pane) -> str:
    """What the pane shows on screen (its rows of the screen, its columns)."""
    r = app.query_one(pane).region
    rows = app.screen._compositor.render_strips()[r.y : r.y + r.height]
    return "\n".join(row.text[r.x : r.x + r.width] for row in rows)


def expected(records, begins, scrapes, t: float) -> tuple[float, float, float]:
    """(level, client tok/s over [t-10, t), server running) at ``t``, from the journal."""
    level = [lv for tb, lv in begins if tb <= t][-1]
    chunks = np.concatenate([np.asarray(r.chunk_times_s) for r in records])
    tokens = np.count_nonzero((chunks >= t - 10) & (chunks < t)) / 10
    running = [n for ts, n in scrapes if ts <= t][-1]
    return float(level), tokens, float(running)


def shown(app) -> tuple[float, float, float]:
    header = _text(app, HeaderBar)
    level = float(re.search(r"closed loop c=(\d+)", header).group(1))
    tok = float(
        re.search(r"out ([\d,]+) tok/s", _text(app, ThroughputPane)).group(1).replace(",", "")
    )
    running = float(re.search(r"running (\d+)", _text(app, ServerPane)).group(1))
    return level, tok, running


async def test_the_cursor_moves_and_the_panes_show_that_moments_figures(recorded) -> None:
    session, records, begins, scrapes = recorded
    replay = load_replay(session)
    start = replay.start_s
    at = start + 16.0  # inside step 2 (c=4), whole seconds from the start like the windows
    app = ReplayApp(replay, at, ui_hz=0, handle_signals=False, user_theme_dir=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.render_tick()
        await pilot.pause()
        for t in (at, at + 1, at + 2):
            level, tok, running = shown(app)
            want = expected(records, begins, scrapes, t)
            assert level == want[0]
            assert tok == pytest.approx(want[1], abs=0.6)  # the pane rounds to whole tok/s
            assert running == want[2]
            assert "replay 00:00:" in _text(app, HintBar)
            await pilot.press("right")
            await pilot.pause()
        assert app.cursor.t == pytest.approx(at + 3)
        await pilot.press("right_square_bracket")  # to the next step's start: c=16
        await pilot.pause()
        step3 = begins[2][0]
        assert app.cursor.t == pytest.approx(step3)
        assert shown(app)[0] == 16
        events = _text(app, EventsPane)
        assert "step 3: c=16" in events
        await pilot.press("left", "left_square_bracket")  # a second back, then to step 2's start
        await pilot.pause()
        assert app.cursor.t == pytest.approx(begins[1][0])
        assert shown(app)[0] == 4
        assert "step 3" not in _text(app, EventsPane), "nothing from after the cursor"
        await pilot.press("plus")  # the load keys do nothing in a replay
        await pilot.pause()
        assert shown(app)[0] == 4


async def test_space_plays_from_the_cursor(recorded) -> None:
    session, *_ = recorded
    replay = load_replay(session)
    app = ReplayApp(replay, replay.start_s + 5, ui_hz=0, handle_signals=False, user_theme_dir=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("space")
        assert app.playing
        await pilot.pause(0.3)
        app.render_tick()
        assert app.cursor.t > replay.start_s + 5.2
        await pilot.press("space")
        assert not app.playing
