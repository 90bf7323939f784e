"""Output lengths spread as ``infmon bench``'s default load spreads them (``Shape.output_spread``):
read from a session's requests, kept in the fitted profile, and replayed, so the replay's closed
loop drifts out of step as the measured one did, with no wave fitted to make it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infmon.cli import main
from infmon.commands.simfit_read import read_session
from infmon.model.records.waves import WAVE_GAP_TPOT, wave_size
from infmon.sim import fitio
from infmon.sim.fit import fit
from infmon.sim.levels import Shape, _Replay, level_config, output_spread
from tests.recorded import unpack_journal
from tests.unit.test_sim_growth import recorded_base


def test_a_spread_covers_its_range_evenly_and_none_keeps_every_request_alike() -> None:
    shape = Shape(8, 32, 32, output_spread=3)
    lengths = [shape.output_of(n) for n in range(700)]
    assert min(lengths) == 29 and max(lengths) == 35
    counts = np.bincount(lengths)[29:]
    assert counts.min() >= 95 and counts.max() <= 105  # 100 each, the golden ratio's spacing
    assert abs(np.mean(lengths[:40]) - 32) < 0.5  # any run of requests is spread, not a ramp
    assert {Shape(8, 32, 32).output_of(n) for n in range(50)} == {32}
    short = {Shape(8, 32, 3, output_spread=5).output_of(n) for n in range(50)}
    assert short == {2, 3, 4}  # held to two tokens at least: a TPOT needs one gap


def test_the_spread_is_read_from_the_lengths_sd() -> None:
    rng = np.random.default_rng(1)
    for seed in range(20):  # bench's 32 ± 10%, however the draws fell
        draws = np.random.default_rng(seed).integers(29, 36, 2000)
        assert output_spread(draws, 32.0) == 3
    assert output_spread(rng.integers(115, 142, 2000), 128.0) == 13  # the default 128 ± 13
    assert output_spread(np.full(500, 32), 32.0) == 0
    assert output_spread(np.array([32] * 499 + [7]), 32.0) == 0  # one stream cut short
    assert output_spread(np.array([32]), 32.0) == 0


@pytest.fixture(scope="module")
def jittered(tmp_path_factory):
    """The real vLLM of 5 Dec (evening), c = 1-16 in three rounds, lengths 29-35."""
    session = unpack_journal("jittered-vllm", tmp_path_factory.mktemp("j") / "session")
    return read_session(session, "auto", [])


@pytest.mark.slow  # one fit of the real session: ~20 s
def test_a_spread_sessions_replay_drifts_out_of_step_as_the_measured_loop_did(
    jittered, tmp_path, capsys
) -> None:
    """Fitted at c = 1, 2, 4 as ``sim --fit --holdout 8,16`` fits it: the replay of c = 8 and 16
    with the session's spread sends in waves within 10% of the rounds' measured ones (1.2-1.3
    and 1.4-1.6 requests), where the same replay with alike lengths stays in the fitted waves
    of one request (the loop's drift is the lengths', not a fitted figure). The profile keeps
    the spread and ``--predict`` replays it."""
    obs, server = jittered
    assert {o.output_spread for o in obs} == {3}
    result = fit(recorded_base(server), [o for o in obs if o.concurrency <= 4])
    cost = result.cost
    assert cost.fitted_range.output_spread == pytest.approx(3 / 32, rel=0.05)
    path = tmp_path / "p.toml"
    path.write_text(fitio.dumps(cost))
    assert fitio.load(path).fitted_range.output_spread == cost.fitted_range.output_spread
    assert main(["sim", "--predict", "--fitted", str(path), "--concurrency", "8"]) == 0
    assert "c=8, prompt 32, output 32 ± 3 (95% band)" in capsys.readouterr().out
    base = recorded_base(server)
    for c in (8, 16):
        measured = float(np.mean([o.arrival_wave for o in obs if o.concurrency == c]))
        shape = next(o.shape for o in obs if o.concurrency == c)
        assert shape.output_spread == 3
        spread, alike = (
            _replayed_wave(base, cost, replace(shape, output_spread=h, requests=c + 200))
            for h in (3, 0)
        )
        assert spread == pytest.approx(measured, rel=0.10), (c, spread, measured)
        assert alike < 1.05 < measured


def _replayed_wave(base, cost, shape: Shape) -> float:
    """The wave the replay's sends fell in, as ``infmon.model.records.waves`` reads a step's."""
    run = _Replay(level_config(base, cost, shape), shape)
    run.run()
    c = shape.concurrency
    tpot = np.median(
        [(run.finish[n][0] - run.first[n][0]) / (shape.output_of(n) - 1) for n in run.finish]
    )
    return wave_size(np.asarray(run.sent_s[c:]), WAVE_GAP_TPOT * float(tpot))
