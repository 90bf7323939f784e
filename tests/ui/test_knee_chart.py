"""The knee chart: a line with a marker per step, round 3-significant-digit ticks, the knee and
the SLO limit drawn as labelled verticals (the same knee the report states)."""

from __future__ import annotations

import re

from infmon.ui.panes import KneePane
from infmon.ui.widgets.chart import Chart
from tests.ui.conftest import make_app
from tests.ui.fakes import populated_session


def chart_text(app) -> str:
    chart = app.query_one(KneePane).query_one(Chart)
    return chart.render().plain


async def test_knee_chart_marks_steps_knee_and_slo(clock):
    app = make_app(
        populated_session(clock), clock=clock, controller_kw={"concurrency": 16, "paused": False}
    )
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        await pilot.press("right_square_bracket")  # c=32: the c=16 step ends
        clock.advance(10.0)
        app.render_tick()
        await pilot.pause()
        text = chart_text(app)
        # one marker per counted level (2, 4, 8, 16; c=1 was too short): E2E's ◆ are drawn
        # last, and can cover a tok/s ● that falls in the same cell
        assert text.count("◆") == 4 and text.count("●") >= 3
        assert "knee" in text and "SLO" in text
        axis = text.splitlines()[-3:]
        assert re.search(r"\b2\s+4\s+8\s+16\b", " ".join(axis))
        assert not re.search(r"\d\.\d{3,}", text), "axis labels keep 3 significant digits"
        assert chart_text(app) == text  # drawing again (a refresh) gives the same chart
        await pilot.resize_terminal(120, 40)  # no room to read it: the table alone
        await pilot.pause()
        app.render_tick()
        assert not app.query_one(KneePane).query_one(Chart).display
