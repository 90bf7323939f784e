"""Energy per step: tokens/s per watt and joules per token from the serving GPUs' power."""

from __future__ import annotations

import math

import pytest

from infmon.model.server.efficiency import step_efficiency


def test_serving_gpus_power_over_tokens():
    e = step_efficiency([(300.0, True), (280.0, True), (90.0, False)], 2900.0)
    assert e is not None and e.gpus == 2 and e.power_w == 580.0
    assert e.tok_s_per_w == pytest.approx(5.0) and e.j_per_token == pytest.approx(0.2)
    assert e.to_dict() == {"power_w": 580.0, "tok_s_per_w": 5.0, "j_per_token": 0.2, "gpus": 2}


def test_all_gpus_when_none_is_known_to_serve():
    e = step_efficiency([(100.0, False), (150.0, False)], 500.0)
    assert e is not None and e.power_w == 250.0 and e.j_per_token == pytest.approx(0.5)


def test_nothing_is_said_without_power_or_tokens():
    assert step_efficiency([], 100.0) is None
    assert step_efficiency([(math.nan, True)], 100.0) is None
    assert step_efficiency([(200.0, True), (math.nan, True)], 100.0) is None  # a partial sum lies
    assert step_efficiency([(200.0, True)], 0.0) is None
    assert step_efficiency([(200.0, True)], math.nan) is None


def test_the_runs_energy_line_names_each_step_with_power_and_none_without():
    from infmon.report.gpu import energy_line

    with_power = {
        "steps": [
            {"concurrency": 1, "efficiency": {"tok_s_per_w": 0.2408, "j_per_token": 4.1538}},
            {"concurrency": 16},  # no GPU power known at this step: not said, never 0
        ]
    }
    assert energy_line(with_power) == (  # type: ignore[arg-type]
        "energy per step (serving GPUs): c=1 0.241 tok/s per W, 4.154 J/token"
    )
    assert energy_line({"steps": [{"concurrency": 1}]}) is None  # type: ignore[typeddict-item]
