"""Issue 26 finding 8: steps held in rate mode are rows of the knee table (``3/s``), never
points of the knee."""

from __future__ import annotations

from infmon.ui.panes import KneePane
from tests.ui.conftest import make_app
from tests.ui.test_gpu_pane import text_of


async def test_rate_steps_are_rows_of_the_knee_table(clock):
    app = make_app(clock=clock, controller_kw={"concurrency": 2, "rate": 3.0, "paused": False})
    async with app.run_test(size=(120, 40)) as pilot:
        clock.advance(5.0)
        await pilot.press("r")
        clock.advance(5.0)
        app.render_tick()
        await pilot.pause()
        modes = [p.mode for p in app.last_snapshot.knee.steps]
        assert modes == ["closed", "rate"], modes
        assert not app.last_snapshot.knee.steps[-1].counted
        assert "3/s" in text_of(app, KneePane)
