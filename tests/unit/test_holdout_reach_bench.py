"""bench/holdout_reach.py: the oracle forecasts a subset of rounds by the mean of the others, and
a held-out check passes only when every figure of every held-out level is within tolerance."""

from __future__ import annotations

import itertools

import pytest

from infmon.sim.observation import Observation
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/holdout_reach.py")


def level(c: int, tpot_ms: float) -> Observation:
    return Observation("s", c, 32, 32, tpot_ms / 1e3, 0.01, c / tpot_ms * 1e3, ttft_p50_s=0.01)


def rounds(*tpots_at_8: float) -> list[Observation]:
    """One round per value: c=4 steady, c=8 at that TPOT (tokens/s following it)."""
    return [o for t in tpots_at_8 for o in (level(4, 2.0), level(8, t))]


def subsets(n: int, k: int) -> list[frozenset[int]]:
    return [frozenset(s) for s in itertools.combinations(range(n), k)]


def test_steady_rounds_pass_every_subset(bench) -> None:
    obs = rounds(3.0, 3.0, 3.0, 3.0)
    reach = bench.judge(obs, subsets(4, 3), [8], bench.oracle(obs), 0.15, "oracle")
    assert reach.subsets == 4 and reach.all_passed == 4
    assert all(v == 4 for v in reach.passed.values())


def test_one_wandering_round_fails_the_check_it_is_in_and_the_one_it_is_not(bench) -> None:
    """Rounds 1, 1, 1, 2 ms: without round 3 the others forecast 2 against a mean of 1 (+100%);
    with it, 1 against 4/3 (-25%). At ±15% no subset passes; at ±50% the three with it do."""
    obs = rounds(1.0, 1.0, 1.0, 2.0)
    tight = bench.judge(obs, subsets(4, 3), [8], bench.oracle(obs), 0.15, "oracle")
    assert tight.passed[(8, "tpot")] == 0 and tight.all_passed == 0
    loose = bench.judge(obs, subsets(4, 3), [8], bench.oracle(obs), 0.5, "oracle")
    assert loose.passed[(8, "tpot")] == 3
    assert loose.passed[(8, "ttft_p50")] == 4  # TTFT held still
    lines = bench.render(loose, [8], 0.5)
    assert lines[0] == "oracle: 4 subsets"
    assert "c=8: within ±50% in  TPOT 75%  TTFT p50 100%" in lines[1]


def test_a_subset_keeps_whole_rounds(bench) -> None:
    obs = rounds(1.0, 2.0, 3.0)
    kept = bench.subset(obs, bench.round_index(obs), frozenset({0, 2}))
    assert [(o.concurrency, o.tpot_s * 1e3) for o in kept] == [
        (4, 2.0),
        (8, 1.0),
        (4, 2.0),
        (8, 3.0),
    ]
