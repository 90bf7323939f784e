"""``--until-ci-on``: the figures ``--until-ci`` waits on, each at every level (bench and method;
an A-B run waits on its speed ratio). What a user types, and what the stop rule makes of the
trials."""

from __future__ import annotations

import argparse

import pytest

from infmon.commands import CliError
from infmon.commands.trials_out import trials_from_args
from infmon.model.compare.trial_figures import LevelTrials, all_tight, loose
from infmon.model.compare.trial_stats import summarize


def opts(**given: object):
    base: dict[str, object] = {"repeat": None, "until_ci": None, "retake": None, "slo": None}
    return trials_from_args(argparse.Namespace(**{**base, **given}))


def test_the_figures_are_read_in_order_once_each() -> None:
    o = opts(until_ci="5%", until_ci_on=" ttft_p50_ms,output_tok_s,ttft_p50_ms ")
    assert o.until_on == ("ttft_p50_ms", "output_tok_s")
    assert o.until_ci == 0.05 and o.repeat == 10
    assert opts(until_ci="5%").until_on == ("output_tok_s",)
    assert opts(until_ci="5%", until_ci_on="goodput_req_s", slo="ttft=1s").until_on == (
        "goodput_req_s",
    )


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ({"until_ci_on": "ttft_p50_ms"}, "give --until-ci PCT too"),
        ({"until_ci": "5%", "until_ci_on": "ttft_p99_ms"}, "'ttft_p99_ms' is none of"),
        ({"until_ci": "5%", "until_ci_on": ","}, "one figure or more"),
        ({"until_ci": "5%", "until_ci_on": "slo_attainment"}, "give --slo too"),
    ],
)
def test_what_cannot_be_waited_on_is_refused(given: dict[str, object], says: str) -> None:
    with pytest.raises(CliError, match=says):
        opts(**given)


def level(label: str, **figures: list[float]) -> LevelTrials:
    n = len(next(iter(figures.values())))
    stats = tuple((name, summarize(v)) for name, v in figures.items())
    return LevelTrials(label, float(label[2:]), tuple(range(n)), stats)


def test_a_steady_throughput_does_not_stop_rounds_whose_latency_wanders() -> None:
    # c=16's tokens/s (made up) within ±1.3 % after three rounds; its TTFT p50 as three rounds
    # of the real vLLM here read it on 5 Dec (8.4, 26.8, 18.6 ms), known only to ±128 %
    levels = [
        level("c=8", output_tok_s=[1500.0, 1510.0, 1495.0], ttft_p50_ms=[15.0, 15.1, 14.9]),
        level("c=16", output_tok_s=[2000.0, 2010.0, 1990.0], ttft_p50_ms=[8.4, 26.8, 18.6]),
    ]
    assert all_tight(levels, 0.05)
    both = ("output_tok_s", "ttft_p50_ms")
    assert not all_tight(levels, 0.05, both)
    assert [(lv, name) for lv, name, _ in loose(levels, 0.05, both)] == [("c=16", "ttft_p50_ms")]
    assert loose(levels, 0.05, both)[0][2].half_width == pytest.approx(1.28, abs=0.01)


def test_two_rounds_are_never_tight() -> None:
    levels = [level("c=4", output_tok_s=[1000.0, 1000.0])]
    assert not all_tight(levels, 0.5)
    assert loose(levels, 0.5)[0][2].n == 2
