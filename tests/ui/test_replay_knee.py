"""Issue 26 finding 9: a replay names the knee when the live run did.

A real `infmon demo` journal (``tests/fixtures/sessions/demo-knee.source.txt``): its sweep stopped
on the knee at c=256 at 85.73 s. The live monitor stops the sweep once the knee is confirmed and the
step past it measured ``step_duration`` (6 s), and its knee pane names the knee from the same step
ledger: from the server's queue once that step's scrapes span ``EARLY_SPAN_S`` (confirming),
confirmed once it measured ``min_step_s`` (5 s). So the replay, fed the journal to the same
time, must name the same knee for the same reason by the sweep's stop, and not before the ledger
could (two 250 ms windows of slack). Its knee table must end with the figures
the live screen showed (c=256 6,410 tok/s ◀ knee, c=512 6,571 tok/s).

Before: the replay fed its records, windows and scrapes to the Session but not to its step ledger,
so it never named a knee (every step "too short", 0 tok/s); earlier still, the ledger was fed but
not the sends of a running step, so the c=512 step (10 s E2E) could be judged only once 20 of its
requests had finished: the knee came at 91 s, 5 s after the live run's (the issue's 00:01:04 vs
"knee not yet" at 00:01:09).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infmon.commands.replay import load_replay
from infmon.journal.reader import SessionReader
from infmon.model.live.session import SessionConfig
from infmon.model.live.session_replay import WINDOW_S, Replay
from infmon.model.steps.knee import EARLY_SPAN_S
from infmon.ui.panes import EventsPane, KneePane
from infmon.ui.replay import ReplayApp
from tests.recorded import unpack_journal
from tests.ui.test_gpu_pane import text_of

STOPPED = re.compile(r"sweep stopped: knee at c=(\d+) \((.*)\); holding c=\d+")


def sweep_stop(path: Path) -> tuple[float, int, str, float]:
    """When (journal time) the live sweep stopped on the knee, the knee, its reason, and the
    step duration the sweep held each level for."""
    with SessionReader(path) as r:
        step_s = float(r.config["step_duration_s"])
        for e in r.iter_events():
            m = STOPPED.match(str(e.get("note") or "")) if e.get("kind") == "sweep" else None
            if m:
                return float(e["t"]), int(m.group(1)), m.group(2), step_s
    raise AssertionError("the journal has no 'sweep stopped: knee' event")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, Replay]:
    path = unpack_journal("demo-knee", tmp_path_factory.mktemp("demo-knee") / "session")
    return path, load_replay(path)


def first_named(replay: Replay, lo: float, hi: float) -> float | None:
    """The first cursor time in ``[lo, hi]`` (a window apart) at which the knee pane names a
    knee."""
    t = lo
    while t <= hi + 1e-9:
        if replay.at(t).snapshot(t).knee.knee_level is not None:
            return t
        t += WINDOW_S
    return None


def test_the_replay_names_the_knee_when_the_live_sweep_stopped_on_it(demo) -> None:
    path, replay = demo
    stop_t, knee, reason, step_s = sweep_stop(path)
    at_stop = replay.at(stop_t).snapshot(stop_t).knee
    assert (at_stop.knee_level, at_stop.knee_confirmed) == (knee, True), at_stop
    assert at_stop.knee_reason.startswith(reason), at_stop.knee_reason
    # the live pane names it from the server's queue once the step past the knee has scrapes
    # over EARLY_SPAN_S (confirming), and confirms it once that step measured min_step_s: the
    # step began measuring step_s before the stop; neither may come sooner
    measuring = stop_t - step_s
    earliest = measuring + EARLY_SPAN_S - 2 * WINDOW_S
    judged = measuring + SessionConfig().min_step_s - 2 * WINDOW_S
    named = first_named(replay, stop_t - 10.0, stop_t)
    print(
        f"sweep stopped {stop_t - replay.start_s:.2f} s; replay named it {named and named - replay.start_s:.2f} s"
    )
    assert named is not None and earliest <= named <= stop_t, (named, earliest, stop_t)
    if named < judged:
        early = replay.at(named).snapshot(named).knee
        assert (early.knee_level, early.knee_confirmed) == (knee, False), early


def test_the_replayed_knee_table_ends_with_the_live_figures(demo) -> None:
    _, replay = demo
    knee = replay.at(replay.end_s).snapshot(replay.end_s).knee
    settled = {p.level: round(p.output_tokens_per_s) for p in knee.steps if p.settled}
    assert settled[256] == 6410 and settled[512] == 6571, settled
    assert knee.knee_level == 256


async def test_the_knee_pane_names_it_at_the_sweeps_stop(demo) -> None:
    path, replay = demo
    stop_t, knee, _, _ = sweep_stop(path)
    app = ReplayApp(replay, stop_t, ui_hz=0, handle_signals=False, user_theme_dir=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        pane = " ".join(text_of(app, KneePane).split())
        assert f"knee c={knee}" in pane and "◀ knee" in pane, pane
        assert f"sweep stopped: knee at c={knee}" in " ".join(text_of(app, EventsPane).split())
        app.move_to(stop_t - 10.0)
        await pilot.pause()
        assert "knee not yet" in " ".join(text_of(app, KneePane).split())
