"""A closed loop's waves (``infmon.model.records.waves``) and ``sim --fit``'s sentence when a
level's TTFT p50 moved with them (``infmon.sim.rounds``)."""

from __future__ import annotations

import math

import numpy as np

from infmon.commands.simfit import read_session
from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord
from infmon.model.records.waves import step_wave, wave_size
from infmon.sim.fit import Observation
from infmon.sim.rounds import WAVE_ROUNDS, wave_links, wave_sentence
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
