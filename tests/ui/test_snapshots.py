"""Screen snapshots (pytest-textual-snapshot) at 80×24, 120×40 and 200×60, dark and light, fixed data.

Update deliberately with ``pytest tests/ui/test_snapshots.py --snapshot-update`` after reading the
report; the fake clock and fixed records make every run draw the same screen.
"""

from __future__ import annotations

import pytest

from infmon.clock import FakeClock
from infmon.model.server.snapshot import SourceState, unavailable
from tests.ui.conftest import make_app
from tests.ui.fakes import ServerFeed, deliver, new_session, populated_session

SIZES = [(80, 24), (120, 40), (200, 60)]
THEMES = ["infmon-dark", "infmon-light"]


async def settle(pilot) -> None:
    pilot.app.render_tick()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("theme", THEMES)
def test_running_sweep(snap_compare, size, theme):
    clock = FakeClock(0.0)
    app = make_app(
        populated_session(clock, spec=True),
        clock=clock,
        controller_kw={"concurrency": 16, "paused": False},
        theme_name=theme,
    )
    assert snap_compare(app, terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_data_yet(snap_compare, size):
    clock = FakeClock(0.0)
    app = make_app(clock=clock)
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_server_down_80x24(snap_compare):
    clock = FakeClock(0.0)
    session = new_session(clock)
    deliver(session, ServerFeed().scrape(1.0), 1.0)
    deliver(session, unavailable(42.0, SourceState.DOWN, "connect", "connection refused"), 42.0)
    clock.advance(50.0)
    app = make_app(session, clock=clock, theme_name="infmon-light")
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


def test_help_screen(snap_compare):
    async def open_help(pilot):
        await pilot.press("question_mark")
        await pilot.pause()

    app = make_app(clock=FakeClock(0.0))
    assert snap_compare(app, terminal_size=(80, 24), run_before=open_help)
