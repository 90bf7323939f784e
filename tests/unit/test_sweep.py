import math

from infmon.model.dashboard import StepPoint
from infmon.model.sweep import Sweep, knee_level, slo_limit_level


def pt(level, tps, meets=None):
    return StepPoint(0, "closed", level, 10.0, tps, math.nan, math.nan, 10, meets)


def test_knee_is_last_doubling_that_paid():
    assert knee_level([pt(1, 100), pt(2, 195), pt(4, 380), pt(8, 400)]) == 4
    assert knee_level([pt(1, 100), pt(2, 200)]) is None
    assert knee_level([]) is None


def test_slo_limit():
    assert slo_limit_level([pt(1, 1, True), pt(2, 1, True), pt(4, 1, False), pt(8, 1, True)]) == 2
    assert slo_limit_level([pt(1, 1)]) is None


def test_sweep_doubles_then_stops_past_knee():
    sw = Sweep(step_s=10)
    assert sw.start(0.0) == 1
    assert sw.next_level(5.0, []) is None
    assert sw.next_level(10.0, [pt(1, 100)]) == 2
    assert sw.next_level(20.0, [pt(1, 100), pt(2, 200)]) == 4
    assert sw.next_level(30.0, [pt(1, 100), pt(2, 200), pt(4, 210)]) is None
    assert sw.stop_reason == "past the knee (c=2)"
    assert not sw.active


def test_sweep_stops_at_slo_breach():
    sw = Sweep(step_s=1)
    sw.start(0.0)
    assert sw.next_level(1.0, [pt(1, 100, meets=False)]) is None
    assert sw.stop_reason == "SLO breached at c=1"


def test_sweep_holds_the_knee_after_stopping():
    sw = Sweep(step_s=1)
    sw.start(0.0)
    sw.level = 4
    assert sw.next_level(1.0, [pt(1, 100), pt(2, 200), pt(4, 210)]) is None
    assert sw.hold_level == 2


def test_unsettled_steps_do_not_call_the_knee():
    sw = Sweep(step_s=1)
    sw.start(0.0)
    sw.level = 4
    running = StepPoint(0, "closed", 4, 1.0, 210.0, math.nan, math.nan, 3, None, settled=False)
    assert sw.next_level(1.0, [pt(1, 100), pt(2, 200), running]) == 8
