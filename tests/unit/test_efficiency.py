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
