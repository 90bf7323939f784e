"""A closed loop's waves (``infmon.model.records.waves``) and ``sim --fit``'s sentence when a
level's TTFT p50 moved with them (``infmon.sim.rounds``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infmon.commands.simfit_read import read_session
from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord
from infmon.model.records.waves import step_wave, wave_size
from infmon.sim.costmodel import PARAMS, FittedCost, FittedRange
from infmon.sim.growth import wave_exponent
from infmon.sim.levels import Shape, _Replay, level_config, replay
from infmon.sim.observation import Observation
from infmon.sim.rounds import WAVE_ROUNDS, wave_links, wave_sentence
from infmon.sim.scenarios import SCENARIOS, build_config
from tests.recorded import unpack_journal


def test_a_wave_is_the_sends_closer_than_the_gap_and_each_request_counts_once() -> None:
    sent = np.array([0.0, 0.0002, 0.0004, 0.010, 0.0101, 0.020])  # waves of 3, 2 and 1
    assert wave_size(sent, 0.001) == (3 * 3 + 2 * 2 + 1 * 1) / 6
    assert wave_size(sent[::-1].copy(), 0.001) == wave_size(sent, 0.001)  # order of records
    assert wave_size(np.array([0.0, 0.01, 0.02]), 0.001) == 1.0  # one at a time
    assert math.isnan(wave_size(np.array([]), 0.001))


def stream(rid: int, sent: float, tpot: float, tokens: int = 8) -> RequestRecord:
    times = tuple(sent + 0.005 + k * tpot for k in range(tokens))
    return RequestRecord(rid, sent, times, times[-1], (1,) * tokens, output_tokens=tokens)


def test_a_steps_waves_are_cut_at_half_its_tpot() -> None:
    """Four users whose requests end in one engine step send again 0.3 ms apart (one wave of
    4); the next wave comes a TPOT (4 ms) later."""
    recs = [stream(4 * w + i, w * 0.004 + i * 0.0003, 0.004) for w in range(5) for i in range(4)]
    assert step_wave(RecordColumns.from_records(recs)) == 4.0
    apart = [stream(i, i * 0.004, 0.004) for i in range(20)]  # a TPOT apart: no waves
    assert step_wave(RecordColumns.from_records(apart)) == 1.0


def test_a_step_without_streams_has_no_wave() -> None:
    failed = [RequestRecord(i, i * 0.01, (), math.nan, error_kind="http") for i in range(3)]
    assert math.isnan(step_wave(RecordColumns.from_records(failed)))


@pytest.fixture(scope="module")
def observations_wandering(tmp_path_factory) -> list[Observation]:
    session = unpack_journal("wandering-vllm", tmp_path_factory.mktemp("w") / "session")
    return read_session(session, "auto", [])[0]


def rounds(waves: list[float], ttft_ms: list[float], c: int = 16) -> list[Observation]:
    return [
        Observation("s", c, 32, 32, 0.005, t / 1e3, 2000.0, ttft_p50_s=t / 1e3, arrival_wave=w)
        for w, t in zip(waves, ttft_ms, strict=True)
    ]


def test_ttft_that_moved_with_the_waves_is_said(tmp_path) -> None:
    """Ten rounds of c=16 on the real vLLM here (``waves-vllm``): the waves read from the
    records, and the rounds' TTFT p50 moving with them."""
    session = unpack_journal("waves-vllm", tmp_path / "session")
    obs, _ = read_session(session, "auto", [])
    assert [o.concurrency for o in obs] == [16] * 10
    (link,) = wave_links(obs)
    assert [round(w, 1) for w in link.waves] == [4.9, 3.7, 4.7, 2.1, 3.3, 3.9, 3.9, 1.6, 4.0, 3.9]
    assert round(link.r, 2) == 0.74
    said = wave_sentence([link])
    assert said is not None
    assert said.startswith("TTFT p50 moved with the closed loop's waves (requests sent together)")
    assert "c=16 r = 0.74 over 10 rounds (waves 1.6-4.9 requests, TTFT p50 8.7-28.7 ms)" in said


def test_ttft_that_did_not_move_with_the_waves_is_not_blamed_on_them() -> None:
    waves = [4.9, 3.7, 4.7, 2.1, 3.3, 3.9]
    against = [12.0, 28.7, 13.8, 30.7, 28.7, 20.0]  # wandered, the other way
    assert wave_sentence(wave_links(rounds(waves, against))) is None
    steady = [22.0, 22.1, 21.9, 22.0, 22.2, 21.8]  # did not wander: nothing to explain
    assert wave_links(rounds(waves, steady)) == []
    few = rounds(waves[: WAVE_ROUNDS - 1], [21.3, 28.7, 26.8, 12.7][: WAVE_ROUNDS - 1])
    assert wave_links(few) == []  # too few rounds to read a correlation
    unknown = rounds([math.nan] * 6, against)
    assert wave_links(unknown) == []


def obs_waves(pairs: list[tuple[int, float]]) -> list[Observation]:
    return [
        Observation("s", c, 32, 32, 0.005, 0.02, 1000.0, ttft_p50_s=0.02, arrival_wave=w)
        for c, w in pairs
    ]


def test_the_fit_reads_how_waves_grow_with_the_users() -> None:
    """Waves of 2 at c=4 and 4 at c=16 are c ** 0.5; one user sends alone and says nothing."""
    assert wave_exponent(obs_waves([(1, 1.0), (4, 2.0), (16, 4.0)])) == pytest.approx(0.5)
    assert wave_exponent(obs_waves([(1, 1.0)])) == 1.0  # nothing to read: all together
    assert wave_exponent(obs_waves([(4, math.nan)])) == 1.0
    assert wave_exponent(obs_waves([(4, 4.0), (8, 8.0)])) == pytest.approx(1.0)  # lockstep


def test_the_real_sessions_users_bunched_far_below_lockstep(observations_wandering) -> None:
    """The real vLLM of 4 Dec (``wandering-vllm``): waves of c ** 0.3-0.6, not c."""
    b = wave_exponent(observations_wandering)
    assert 0.3 < b < 0.6


def cost(b: float, api: str = "serial") -> FittedCost:
    values = dict.fromkeys(PARAMS, 0.0) | {
        "step_s": 1e-3, "seq_s": 0.1e-3, "weights_s": 1e-3, "compute_token_s": 0.02e-3,
        "request_s": 1e-3,
    }  # fmt: skip
    n = len(PARAMS)
    return FittedCost(
        values=tuple(values[p] for p in PARAMS),
        cov=tuple((0.0,) * n for _ in range(n)),
        sources=("",) * n,
        rms_rel=0.01,
        fitted_range=FittedRange((1, 16), (32, 32), (32, 32), 16),
        api_server=api,
        wave_exponent=b,
    )


def test_a_fitted_wave_is_a_whole_number_of_users_from_one_to_all() -> None:
    assert [cost(0.5).wave(c) for c in (1, 2, 4, 8, 16)] == [1, 1, 2, 3, 4]
    assert cost(1.0).wave(16) == 16 and cost(0.0).wave(16) == 1


def test_the_replay_starts_its_users_in_the_fitted_waves() -> None:
    """c=16 in waves of 4 (c ** 0.5): four sends at once, four times, spread over a request's
    life; with a serial API server a request waits behind its wave, so TTFT falls below
    lockstep's, where the API server takes all 16 one after another (8.2 ms here; 7.1 in waves
    of 4: the serial server itself spreads a lockstep wave over later steps)."""
    base = build_config(SCENARIOS["baseline"])
    shape = Shape(16, 32, 32)
    run = _Replay(level_config(base, cost(0.5), shape), shape)
    run.run()
    starts = sorted(run.sent_s[:16])
    assert [starts.count(t) for t in sorted(set(starts))] == [4, 4, 4, 4]
    waves = replay(base, cost(0.5), shape).ttft_p50 @ cost(0.5).vector
    lockstep = replay(base, cost(1.0), shape).ttft_p50 @ cost(1.0).vector
    assert waves < 0.9 * lockstep
