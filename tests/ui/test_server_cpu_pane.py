"""The server pane's API-server CPU line, from two real vLLM pages (the second with its
``process_cpu_seconds_total`` moved on: ``tests/unit/test_api_server_cpu.py``)."""

from __future__ import annotations

import pytest

from infmon.ui.panes.base import Body
from infmon.ui.panes.server import ServerPane
from tests.ui.conftest import make_app
from tests.unit.test_api_server_cpu import CPU_LINE, PAGE, later, window


async def _server_text(clock, first: str, second: str):
    app = make_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        app.session.add_server(window(first, second), 1.0)
        clock.advance(2.0)
        app.render_tick()
        await pilot.pause()
        body = app.query_one(ServerPane).query_one(Body).last_text
        assert body is not None
        return body


@pytest.mark.parametrize(
    ("cpu_s", "shown", "warned"), [(13.98, "0.42", False), (15.12, "0.99", True)]
)
async def test_the_server_pane_says_the_api_servers_cores(clock, cpu_s, shown, warned) -> None:
    body = await _server_text(clock, PAGE, later(cpu_s))
    assert f"API server CPU {shown} cores" in body.plain
    at = body.plain.index(f"{shown} cores")
    styled = [s for s in body.spans if s.start <= at < s.end and str(s.style)]
    assert bool(styled) == warned  # near one core: the warning style


async def test_a_page_without_it_shows_no_line(clock) -> None:
    bare = PAGE.replace(CPU_LINE + "\n", "")
    body = await _server_text(clock, bare, bare)
    assert "API server CPU" not in body.plain
