"""The knee rule and the SLO limit on synthetic sweep curves."""

from __future__ import annotations

import pytest

from infmon.model.steps import knee as rule
from infmon.model.steps.knee import growth_per_doubling
from infmon.report.stepstats import knee_point


def find_knee(steps):
    """The rule over report ``steps[]`` entries, read as a report reads them."""
    return rule.find_knee([knee_point(s) for s in steps])


def slo_max_concurrency(steps):
    return rule.slo_max_concurrency([knee_point(s) for s in steps])


def steps(cs, tputs, p50s_ms, attain=None):
    attain = attain or [None] * len(cs)
    return [
        {
            "concurrency": c,
            "output_throughput_tok_s": t,
            "e2el_ms": {"p50": p50},
            "slo_attainment": a,
        }
        for c, t, p50, a in zip(cs, tputs, p50s_ms, attain, strict=True)
    ]


def test_growth_is_normalised_per_doubling() -> None:
    assert growth_per_doubling(1, 100, 2, 200) == pytest.approx(1.0)
    assert growth_per_doubling(1, 100, 4, 150) == pytest.approx(1.5**0.5 - 1)


def test_knee_where_throughput_flattens_and_latency_climbs() -> None:
    s = steps(
        [1, 2, 4, 8, 16, 32], [100, 200, 400, 780, 820, 830], [1000, 1000, 1010, 1050, 2000, 4000]
    )
    knee = find_knee(s)
    assert knee is not None and knee.concurrency == 8
    assert "c=8" in knee.reason and "c=16" in knee.reason


def test_no_knee_while_throughput_scales() -> None:
    assert find_knee(steps([1, 2, 4, 8], [100, 195, 390, 760], [1000, 1010, 1020, 1040])) is None


def test_flat_throughput_without_rising_latency_is_not_a_knee() -> None:
    assert find_knee(steps([1, 2, 4], [100, 102, 103], [1000, 1000, 990])) is None


def test_a_flat_patch_that_recovers_is_not_the_knee() -> None:
    s = steps([1, 2, 4, 8, 16], [100, 105, 200, 210, 212], [1000, 1100, 1150, 1500, 3000])
    assert find_knee(s).concurrency == 4


def test_uneven_steps_and_unsorted_input() -> None:
    s = steps([16, 1, 4], [160, 100, 150], [3000, 1000, 1200])
    assert find_knee(s).concurrency == 4


def test_rate_steps_have_no_concurrency_knee() -> None:
    assert find_knee([{"rate": 1.0, "output_throughput_tok_s": 10, "e2el_ms": {"p50": 1}}]) is None


def test_slo_max_concurrency_is_the_last_of_the_meeting_run() -> None:
    s = steps([1, 2, 4, 8, 16], [1] * 5, [1] * 5, [1.0, 0.95, 0.92, 0.5, 0.95])
    assert slo_max_concurrency(s) == 4
    assert slo_max_concurrency(steps([1, 2], [1, 1], [1, 1])) is None
    assert slo_max_concurrency(steps([1, 2], [1, 1], [1, 1], [0.2, 0.1])) is None


def with_server(step: dict, running: float, waiting: float, kv: float = 0.5, pre: float = 0):
    step["server_evidence"] = {
        "samples": 8,
        "running_p50": running,
        "waiting_p50": waiting,
        "kv_usage_max": kv,
        "preemptions": pre,
    }
    return step


def test_a_capped_running_count_with_a_queue_is_the_knee_whatever_the_throughput_says() -> None:
    # the client's throughput still "grows" 12 % at c=512 (noise), but the server queues
    s = steps([64, 128, 256, 512], [3000, 5800, 9000, 10100], [2000, 2100, 2500, 4800])
    for step, (run, wait) in zip(s, [(64, 0), (128, 0), (256, 0), (256, 245)], strict=True):
        with_server(step, run, wait)
    knee = find_knee(s)
    assert knee is not None and knee.concurrency == 256 and knee.confirmed
    assert knee.evidence == "server"
    assert "running capped at 256 while 245 wait" in knee.reason
    assert "max_num_seqs ≈ 256" in knee.reason


def test_kv_full_with_preemptions_saturates_a_level() -> None:
    s = steps([8, 16, 32], [400, 800, 1500], [1000, 1010, 1200])
    for step, kv, pre in zip(s, [0.3, 0.6, 0.99], [0, 0, 14], strict=True):
        with_server(step, step["concurrency"], 0, kv, pre)
    knee = find_knee(s)
    assert knee is not None and knee.concurrency == 16
    assert "KV cache full (99%) with 14 preemptions at c=32" in knee.reason


def test_one_flat_doubling_is_a_knee_still_confirming() -> None:
    knee = find_knee(steps([1, 2, 4], [100, 200, 205], [1000, 1000, 1300]))
    assert knee is not None and knee.concurrency == 2 and not knee.confirmed
    assert knee.label == "c=2 (confirming)"
    knee = find_knee(steps([1, 2, 4, 8], [100, 200, 205, 207], [1000, 1000, 1300, 2600]))
    assert knee is not None and knee.confirmed


def test_short_steps_and_revisits_do_not_feed_the_knee() -> None:
    s = steps([1, 2, 4, 8, 4], [100, 200, 400, 800, 300], [1000, 1000, 1000, 1000, 900])
    s[2]["eligible"] = False  # a 3 s step at c=4: not judged
    assert find_knee(s) is None  # the revisit of c=4 (last) counts only as the first eligible one
    s[2]["eligible"] = True
    assert find_knee(s) is None


def _pts(cs, tputs, p50s_ms):
    return [knee_point(s) for s in steps(cs, tputs, p50s_ms)]


def test_a_knee_outgrown_is_withdrawn_with_the_doubling_that_grew() -> None:
    watch = rule.KneeWatch()
    flat = _pts([1, 2, 4, 8], [100, 200, 400, 410], [1000, 1000, 1000, 1500])
    assert watch.update(rule.find_knee(flat), flat) is None and watch.named.concurrency == 4
    grew = _pts([1, 2, 4, 8, 16], [100, 200, 400, 410, 800], [1000, 1000, 1000, 1500, 1600])
    gone = watch.update(rule.find_knee(grew), grew)
    assert gone is not None and watch.withdrawn == gone and watch.named is None
    assert gone.text == "knee ≈ c=4 withdrawn: c=16 grew +95% per doubling from c=8"
    assert watch.update(None, grew) is None and watch.withdrawn is not None  # said once
    # a knee named above it (c=16 flattened too): c=4's withdrawal is still said
    higher = _pts([1, 2, 4, 8, 16, 32], [100, 200, 400, 410, 800, 810], [1] * 3 + [2, 3, 4])
    knee = rule.find_knee(higher)
    assert knee is not None and knee.concurrency == 16
    assert watch.update(knee, higher) is None and watch.withdrawn.knee.concurrency == 4
    # named again at its own level: no longer withdrawn
    assert watch.update(rule.Knee(4, "capped", True, "server"), higher) is None
    assert watch.withdrawn is None


def test_a_knee_moving_up_withdraws_the_old_one_and_one_moving_down_does_not() -> None:
    watch = rule.KneeWatch()
    watch.update(rule.Knee(8, "", False, "throughput"), [])
    gone = watch.update(rule.Knee(16, "", False, "throughput"), [])
    assert gone is not None and gone.knee.concurrency == 8
    assert gone.why == "its step at c=8 is no longer counted"
    assert watch.update(rule.Knee(4, "capped", True, "server"), []) is None
    assert watch.withdrawn is None and watch.named.concurrency == 4
