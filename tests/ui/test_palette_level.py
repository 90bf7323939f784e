"""The command palette sets a level outright (issue 26, finding 16: it had no "set concurrency
to N"): typed as an operator would, through Pilot, against the real controller."""

from __future__ import annotations

import time

import pytest
from textual.command import CommandPalette

from infmon.model.steps.span import CLOSED, RATE, Level
from infmon.ui.commands import parse_level
from infmon.ui.screens import LevelScreen
from tests.ui.conftest import make_app
from tests.ui.test_keys import levels


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("set concurrency 64", Level(CLOSED, 64)),
        ("Concurrency to 8", Level(CLOSED, 8)),
        ("c=32", Level(CLOSED, 32)),
        ("64", Level(CLOSED, 64)),
        ("set rate 2.5", Level(RATE, 2.5)),
        ("5 req/s", Level(RATE, 5.0)),
        ("set concurrency 0", None),
        ("set concurrency 2.5", None),
        ("set concurrency lots", None),
        ("sweep", None),
    ],
)
def test_what_the_palette_reads_as_a_level(text: str, level: Level | None) -> None:
    assert parse_level(text) == level


def _offered(app) -> list[str]:
    lists = app.screen.query("CommandList")
    return [str(o.prompt) for o in lists.first().options] if lists else []


async def _until_offered(pilot, app, words: str) -> None:
    """The palette searches in a worker: wait (with a deadline) until it lists ``words``."""
    deadline = time.monotonic() + 10.0
    while not any(words in t for t in _offered(app)):
        assert time.monotonic() < deadline, f"{words!r} not offered: {_offered(app)}"
        await pilot.pause(0.02)


async def _type(pilot, text: str) -> None:
    for ch in text:
        await pilot.press("space" if ch == " " else "equals_sign" if ch == "=" else ch)


async def test_set_concurrency_from_the_palette_stops_the_sweep(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 4, "paused": False})
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")  # a sweep runs: the operator's level takes the dial from it
        assert app.controller.dial.sweeping
        clock.advance(2.0)
        await pilot.press("ctrl+p")
        assert isinstance(app.screen, CommandPalette)
        await _type(pilot, "set concurrency 64")
        await _until_offered(pilot, app, "Set concurrency to 64")
        await pilot.press("enter")
        await pilot.pause()
        assert levels(app)[-1] == ("closed", 64)
        assert not app.controller.dial.sweeping
        assert app.last_snapshot.header.load_level == 64
        notes = [p.get("note") for k, p in app.controller.journal.events if k == "sweep"]
        assert "sweep stopped: the operator took the dial" in notes


async def test_the_palettes_prompt_asks_again_for_what_is_no_level(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 2, "paused": False})
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_set_level()  # the palette's "Set concurrency to N (or a rate in req/s)"
        await pilot.pause()
        assert isinstance(app.screen, LevelScreen)
        await _type(pilot, "lots")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LevelScreen) and "not a level" in str(
            app.screen.query_one("#level-problem").render()
        )
        await _type(pilot, "rate 5")
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, LevelScreen)
        assert levels(app)[-1] == ("rate", 5.0)


async def test_the_palette_offers_it(clock):
    app = make_app(clock=clock)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")
        await _type(pilot, "set conc")
        await _until_offered(pilot, app, "Set concurrency to N")
