"""The load dial (keys and the sweep, pure) and the server's health state machine."""

from __future__ import annotations

import math

from infmon.model.live.dial import (
    DialState,
    LoadDial,
    SweepStep,
    rate_down,
    rate_up,
    sweep_levels,
)
from infmon.model.server.health import DOWN, NO_METRICS, UP, ServerHealth
from infmon.model.server.snapshot import ServerSnapshot, SourceState, unavailable
from infmon.model.steps.knee import Knee
from infmon.model.steps.span import CLOSED, RATE


def dial(**kw) -> LoadDial:
    state = DialState(
        kw.pop("mode", CLOSED), kw.pop("c", 4), kw.pop("rate", 1.0), kw.pop("paused", False)
    )
    return LoadDial(state, step_s=kw.pop("step_s", 10.0), max_level=kw.pop("max_level", 1024))


def test_keys_move_the_level_and_never_below_one_stream() -> None:
    d = dial(c=4)
    seen = [d.press(k).level.value for k in ("up", "down", "down", "double", "halve", "halve")]
    assert seen == [5, 4, 3, 6, 3, 1]
    assert d.press("halve").level.value == 1
    change = d.press("pause")
    assert change.paused is True and change.level is None and d.state.paused


def test_rate_steps_through_fractions_then_whole_requests() -> None:
    assert [rate_up(r) for r in (0.1, 0.2, 0.5, 1.0, 2.0, 2.4)] == [0.2, 0.5, 1.0, 2.0, 3.0, 3.0]
    assert [rate_down(r) for r in (3.0, 1.0, 0.5, 0.2, 0.1, 2.5)] == [2.0, 0.5, 0.2, 0.1, 0.1, 2.0]
    d = dial(mode=RATE, rate=1.0)
    assert [d.press(k).level.value for k in ("down", "up", "double")] == [0.5, 1.0, 2.0]


def test_mode_switch_keeps_todays_load_as_a_rate() -> None:
    d = dial(c=8)
    change = d.press("mode", requests_per_s=12.4)
    assert change.level.mode == RATE and change.level.value == 12.0
    assert d.press("mode").level.mode == CLOSED and d.state.concurrency == 8


def test_the_sweep_doubles_after_each_hold_and_stops_at_a_confirmed_knee() -> None:
    d = dial(c=3, paused=True, step_s=10.0, max_level=64)
    start = d.press("sweep")
    assert start.level.value == 1 and start.paused is False and d.sweeping
    assert d.tick(SweepStep(9.9), knee=None, slo_limit=None) is None
    assert d.tick(SweepStep(10.0, attainment=math.nan), None, None).level.value == 2
    assert d.progress(SweepStep(4.0)).index == 2 and d.progress(SweepStep(4.0)).left_s == 6.0
    assert d.progress(SweepStep(4.0)).total == len(sweep_levels(1, 64)) == 7
    candidate = Knee(2, "flat", confirmed=False, evidence="throughput")
    assert (
        d.tick(SweepStep(10.0, attainment=math.nan), candidate, None).level.value == 4
    )  # not confirmed: go on
    knee = Knee(2, "running capped", confirmed=True, evidence="server")
    stop = d.tick(SweepStep(10.0, attainment=math.nan), knee, None)
    assert stop.level.value == 2 and stop.origin == "hold" and not d.sweeping
    assert "knee at c=2" in stop.note and "holding c=2" in stop.note


def test_the_sweep_stops_at_an_slo_breach_and_when_the_operator_takes_the_dial() -> None:
    d = dial(step_s=1.0)
    d.press("sweep")
    d.tick(SweepStep(1.0, attainment=1.0), None, None)  # c=2
    stop = d.tick(SweepStep(1.0, attainment=0.5), None, slo_limit=1)
    assert "SLO breached at c=2" in stop.note and stop.level.value == 1
    d.press("sweep")
    took = d.press("up")
    assert not d.sweeping and "the operator took the dial" in took.note
    assert (
        d.tick(SweepStep(100.0, attainment=math.nan), None, None) is None
    )  # no sweep: nothing moves


def test_a_paused_sweep_waits() -> None:
    d = dial(step_s=1.0)
    d.press("sweep")
    d.press("pause")
    assert d.tick(SweepStep(100.0, attainment=math.nan), None, None) is None


def ok(t: float, restarted: bool = False) -> ServerSnapshot:
    return ServerSnapshot(timestamp_s=t, running=1.0, server_restarted=restarted)


def test_health_says_each_change_once() -> None:
    h = ServerHealth()
    assert h.observe(ok(1.0)) == () and h.state == UP
    down = h.observe(unavailable(2.0, SourceState.STALE, "connect", "refused"))
    assert [e.kind for e in down] == ["server_down"] and h.state == DOWN and h.down_since_s == 2.0
    assert h.observe(unavailable(3.0, SourceState.DOWN, "connect", "refused")) == ()
    assert h.failed_by_kind["connect"] == 2
    (up,) = h.observe(ok(7.5))
    assert up.kind == "server_up" and up.down_s == 5.5 and up.text == "server back up after 5.5 s"
    assert [(o.start_s, o.end_s) for o in h.all_outages()] == [(2.0, 7.5)]
    (restart,) = h.observe(ok(8.0, restarted=True))
    assert restart.kind == "restart" and h.restarts == 1


def test_no_metrics_is_not_an_outage_and_an_open_outage_is_reported() -> None:
    h = ServerHealth()
    snap = unavailable(1.0, SourceState.NO_METRICS, "no_metrics", "404")
    assert [e.kind for e in h.observe(snap)] == ["no_server_metrics"]
    assert h.observe(snap) == () and h.state == NO_METRICS and h.up
    h.observe(unavailable(5.0, SourceState.DOWN, "timeout", "no answer"))
    assert h.all_outages()[-1].end_s is None and h.all_outages()[-1].duration_s is None


def test_a_sweep_step_lasts_three_of_the_previous_levels_e2e_p90_of_measured_time() -> None:
    """Issue 26 finding 2: 6 s steps at levels whose requests take 8-14 s finished none."""
    d = dial(step_s=6.0, max_level=64)
    d.press("sweep")
    assert d.tick(SweepStep(6.5, 5.5, e2el_p90_s=4.0), None, None) is None  # warm-up excluded
    assert d.tick(SweepStep(7.0, 6.0, e2el_p90_s=4.0), None, None).level.value == 2
    # c=2 must last 3 × 4 s = 12 s of measured time
    assert d.tick(SweepStep(12.0, 11.0), None, None) is None
    assert d.progress(SweepStep(12.0, 11.0)).left_s == 1.0
    assert d.tick(SweepStep(13.0, 12.0, e2el_p90_s=1.0), None, None).level.value == 4
    # c=4: max(6 s, 3 × 1 s)
    assert d.tick(SweepStep(6.5, 5.9), None, None) is None
    assert d.tick(SweepStep(7.0, 6.0), None, None).level.value == 8


def test_a_sweep_step_waits_for_its_clean_start_then_lets_a_transition_go() -> None:
    d = dial(step_s=6.0)
    d.press("sweep")
    assert d.tick(SweepStep(5.0, 0.0, settling=True), None, None) is None
    assert d.progress(SweepStep(5.0, 0.0, settling=True)).left_s == 1.0
    # measured time counts from the clean start, not from the change
    assert d.tick(SweepStep(9.0, 4.0), None, None) is None
    moved = d.tick(SweepStep(6.0, 0.0, settling=True), None, None)
    assert moved is not None and moved.level.value == 2  # never clean within its time


def test_a_confirmed_knee_ends_a_long_step_at_the_base_duration() -> None:
    """A level past a knee its figures confirmed (the server's batch capped while requests
    wait, or a second flat doubling) need not last 3 × E2E p90: the verdict is in."""
    d = dial(step_s=6.0, max_level=64)
    d.press("sweep")
    d.tick(SweepStep(7.0, 6.0, e2el_p90_s=10.0), None, None)  # c=2 must last 30 s
    confirming = Knee(1, "flat", confirmed=False, evidence="throughput")
    assert d.tick(SweepStep(7.0, 6.0), confirming, None) is None
    server = Knee(1, "running capped at 1 while 1 wait at c=2", confirmed=True, evidence="server")
    assert d.tick(SweepStep(6.0, 5.0), server, None) is None
    stop = d.tick(SweepStep(7.0, 6.0), server, None)
    assert stop is not None and stop.verdict and "knee at c=1" in stop.note
