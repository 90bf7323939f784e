"""A knee shown and then outgrown is said withdrawn, not dropped (the round-3 CI failure of
``test_tmux_demo_knee``: the pane named "knee ≈ c=128", c=256 then grew past it, and the closing
summary said "no knee yet" as if none had been shown).

The sweep 1, 2, 4, 8: c=4's step reads flat against c=2 (a starved level: 2 requests a second, as
c=2) while latency rises, so c=2 is the knee's candidate; c=8 then grows ×2 and withdraws it. The
pane, the events and the summary must say so, with the doubling that grew.
"""

from __future__ import annotations

import re

from infmon.model.live.step_views import closing_text
from infmon.ui.panes import EventsPane, KneePane
from tests.ui.conftest import make_app
from tests.ui.fakes import populated_session
from tests.ui.test_panes import text_of

STARVED = {1: 1, 2: 2, 4: 2, 8: 4}
"""Requests a second at each level: c=4 no more than c=2."""


async def test_the_pane_shows_the_candidate_then_its_withdrawal(clock) -> None:
    flat = populated_session(clock, steps=(1, 2, 4), per_s=STARVED)
    shown = flat.snapshot(clock.now()).knee
    assert shown.knee_level == 2 and not shown.knee_confirmed and not shown.withdrawn

    session = populated_session(clock, steps=(1, 2, 4, 8), per_s=STARVED)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.render_tick()
        pane = " ".join(text_of(app, KneePane).split())
        assert "knee not yet" in pane
        gain = re.search(r"│?\s*4\s+8\s+[\d,]+\s+(\+\d+%)", text_of(app, KneePane))
        assert gain is not None  # the table's c=8 row, its gain per doubling
        assert f"knee ≈ c=2 withdrawn: c=8 grew {gain.group(1)} per doubling from c=4" in pane
        assert "withdrawn" in text_of(app, EventsPane)


def test_the_monitor_says_the_withdrawn_knee_in_pane_events_and_summary(clock) -> None:
    session = populated_session(clock, steps=(1, 2, 4, 8), per_s=STARVED)
    snap = session.snapshot(clock.now())
    assert snap.knee.knee_level is None
    c8 = next(p for p in snap.knee.steps if p.level == 8)
    gone = f"knee ≈ c=2 withdrawn: c=8 grew {c8.growth_per_doubling:+.0%} per doubling from c=4"
    assert snap.knee.withdrawn == gone and c8.growth_per_doubling > 0.5
    said = [e.text for e in snap.events if "withdrawn" in e.text]
    assert len(said) == 1 and said[0].startswith("knee ≈ c=2 withdrawn: c=8 grew +")  # once
    text = closing_text(session.closing(clock.now()))
    assert f"no knee yet (throughput still growing); {gone};" in text
