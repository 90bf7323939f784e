import math

from infmon.model.dashboard import StepPoint
from infmon.model.knee import find_knee
from infmon.model.live_steps import knee_of, slo_limit_of
from infmon.model.sweep import Sweep


def pt(level, tps, attainment=math.nan, p50_s=None, settled=True, mode="closed"):
    """A step whose median E2E latency rises with load unless given."""
    p50 = 0.5 + 0.01 * level if p50_s is None else p50_s
    return StepPoint(0, mode, level, 10.0, tps, p50, p50, math.nan, 10, attainment, settled)


def test_live_knee_is_the_bench_knee():
    points = [pt(1, 100), pt(2, 195), pt(4, 380), pt(8, 400)]
    knee = knee_of(points)
    assert knee is not None and knee["concurrency"] == 4
    assert knee == find_knee([p.to_dict() for p in points])
    assert knee_of([pt(1, 100), pt(2, 200)]) is None
    assert knee_of([]) is None


def test_flat_throughput_with_flat_latency_is_no_knee_on_screen_either():
    # the old live rule called c=1 here; the bench (and now the screen) needs latency to rise
    assert knee_of([pt(1, 100, p50_s=1.0), pt(2, 102, p50_s=1.0), pt(4, 103, p50_s=0.99)]) is None


def test_a_recovering_flat_patch_is_not_the_knee_on_screen_either():
    points = [pt(1, 100), pt(2, 105), pt(4, 200), pt(8, 210), pt(16, 212)]
    assert knee_of(points)["concurrency"] == 4


def test_live_knee_ignores_unsettled_and_rate_steps_and_keeps_latest_per_level():
    assert knee_of([pt(1, 100), pt(2, 200), pt(4, 210, settled=False)]) is None
    assert knee_of([pt(1, 100), pt(2, 200), pt(4, 210, mode="rate")]) is None
    # c=4 held twice: the later measurement counts
    assert knee_of([pt(1, 100), pt(2, 200), pt(4, 210), pt(4, 400)]) is None


def test_slo_limit():
    assert slo_limit_of([pt(1, 1, 1.0), pt(2, 1, 0.95), pt(4, 1, 0.5), pt(8, 1, 1.0)]) == 2
    assert slo_limit_of([pt(1, 1)]) is None
    # a step with no measured request yet is not a breach
    assert slo_limit_of([pt(1, 1, 1.0), pt(2, 1), pt(4, 1, 0.95)]) == 4


def test_meets_slo_follows_the_bench_attainment():
    assert pt(1, 1, 0.9).meets_slo is True
    assert pt(1, 1, 0.89).meets_slo is False
    assert pt(1, 1).meets_slo is None


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
    assert sw.next_level(1.0, [pt(1, 100, attainment=0.5)]) is None
    assert sw.stop_reason == "SLO breached at c=1"
    assert sw.hold_level is None


def test_sweep_holds_the_slo_limit_after_a_breach():
    sw = Sweep(step_s=1)
    sw.start(0.0)
    sw.level = 4
    assert sw.next_level(1.0, [pt(1, 100, 1.0), pt(2, 200, 0.95), pt(4, 390, 0.4)]) is None
    assert sw.hold_level == 2


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
    running = pt(4, 210.0, settled=False)
    assert sw.next_level(1.0, [pt(1, 100), pt(2, 200), running]) == 8
