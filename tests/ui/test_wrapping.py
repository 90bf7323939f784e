"""Issue 26 finding 13: nothing that matters is cut at 120×40 or 80×24: an event's path and a
knee's limit reason wrap inside their pane instead of ending in "…"."""

from __future__ import annotations

from dataclasses import replace

import pytest

from infmon.ui.panes import EventsPane, KneePane
from tests.ui.conftest import make_app
from tests.ui.fakes import populated_session
from tests.ui.test_gpu_pane import text_of

PATH = "infmon-sessions/20261202T011500Z-run/report.md"
LIMIT = (
    "max_num_seqs ≈ 256 (inferred: running stayed at 256 while 253 waited at c=512; "
    "the KV cache was 61% full)"
)


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_a_report_path_wraps_in_the_events_pane(clock, size):
    session = populated_session(clock)
    app = make_app(session, clock=clock)
    async with app.run_test(size=size) as pilot:
        session.add_event(clock.now(), "report", f"report written: {PATH}")
        app.render_tick()
        await pilot.pause()
        events = text_of(app, EventsPane)
        assert "…" not in events.splitlines()[-1]
        assert f"report written: {PATH}" in "".join(events.splitlines()), events


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_knee_limit_reason_and_kv_fill_are_never_cut(clock, size):
    session = populated_session(clock)
    app = make_app(session, clock=clock)
    async with app.run_test(size=size) as pilot:
        app.render_tick()
        pane = app.query_one(KneePane)
        pane.snapshot = replace(app.last_snapshot.knee, knee_limit=LIMIT)
        await pilot.pause()
        knee = text_of(app, KneePane)
        assert f"limit: {LIMIT}" in _flat(knee), knee
        pane.snapshot = replace(app.last_snapshot.knee, knee_limit="", kv_fill_level=1795.0)
        await pilot.pause()
        assert "KV fills c≈1,795" in text_of(app, KneePane)
