"""The knee rule and the SLO limit on synthetic sweep curves."""

from __future__ import annotations

import pytest

from infmon.model.knee import find_knee, growth_per_doubling, slo_max_concurrency


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
    assert knee is not None and knee["concurrency"] == 8
    assert "c=8" in knee["reason"] and "c=16" in knee["reason"]


def test_no_knee_while_throughput_scales() -> None:
    assert find_knee(steps([1, 2, 4, 8], [100, 195, 390, 760], [1000, 1010, 1020, 1040])) is None


def test_flat_throughput_without_rising_latency_is_not_a_knee() -> None:
    assert find_knee(steps([1, 2, 4], [100, 102, 103], [1000, 1000, 990])) is None


def test_a_flat_patch_that_recovers_is_not_the_knee() -> None:
    s = steps([1, 2, 4, 8, 16], [100, 105, 200, 210, 212], [1000, 1100, 1150, 1500, 3000])
    assert find_knee(s)["concurrency"] == 4


def test_uneven_steps_and_unsorted_input() -> None:
    s = steps([16, 1, 4], [160, 100, 150], [3000, 1000, 1200])
    assert find_knee(s)["concurrency"] == 4


def test_rate_steps_have_no_concurrency_knee() -> None:
    assert find_knee([{"rate": 1.0, "output_throughput_tok_s": 10, "e2el_ms": {"p50": 1}}]) is None


def test_slo_max_concurrency_is_the_last_of_the_meeting_run() -> None:
    s = steps([1, 2, 4, 8, 16], [1] * 5, [1] * 5, [1.0, 0.95, 0.92, 0.5, 0.95])
    assert slo_max_concurrency(s) == 4
    assert slo_max_concurrency(steps([1, 2], [1, 1], [1, 1])) is None
    assert slo_max_concurrency(steps([1, 2], [1, 1], [1, 1], [0.2, 0.1])) is None
