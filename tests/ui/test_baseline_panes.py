"""The panes against a baseline run (``infmon URL --baseline RUN``): the header names the run
and the config change, the spec pane the slow-down and break-even per level, the knee pane
each level's tok/s delta and the latest level's latencies against the baseline's."""

from __future__ import annotations

import re

from infmon.model.steps.span import CLOSED, Level
from infmon.ui.panes import HeaderBar, KneePane, SpecPane
from tests.ui.conftest import make_app
from tests.ui.fakes import new_session
from tests.ui.test_panes import text_of
from tests.unit.test_live_baseline import _reference, _sweep


async def test_panes_show_the_run_against_its_baseline(clock):
    ref = _reference(clock)
    session = new_session(clock)
    session.set_reference(ref, clock.now())
    _sweep(session, clock, spec=0.3, slow=3.0)
    clock.advance(3.0)
    view = session.snapshot(clock.now()).baseline
    assert view is not None
    app = make_app(session, clock=clock, controller_kw={"concurrency": 4, "paused": False})
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        app.render_tick()
        await pilot.pause()
        header = text_of(app, HeaderBar)
        assert "vs baseline (speculative: none → draft k=4" in header
        spec = text_of(app, SpecPane)
        for level in (1, 4):
            c = view.at(Level(CLOSED, level))
            e = c.spec.economics
            line = re.search(rf"c={level}\s.*\n\s+([\d.]+)× slower · (.*), has α ([\d.]+)", spec)
            assert line is not None, spec
            assert float(line.group(1)) == round(1 / e.speedup, 1)
            assert float(line.group(3)) == round(e.alpha, 2)
        assert "1 target+k draft passes" in spec
        knee = text_of(app, KneePane)
        tok = view.at(Level(CLOSED, 4)).get("tok_s")
        assert f"base {100 * tok.delta.rel:+.0f}%" in knee
        tpot = view.at(Level(CLOSED, 4)).get("tpot_p50")
        assert f"TPOT {100 * tpot.delta.rel:+.0f}%*" in knee, knee
