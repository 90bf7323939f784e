"""How a fitted server's costs grow with concurrency (``infmon.sim.growth.growth_shape``): read
from the levels' own curves where they span enough, carried from a wider sweep's profile
(``--shape-from``) where they do not; and the replay that uses the shape. The rate form a fit
takes when neither is there: ``tests/unit/test_sim_rate.py``."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from infmon.commands.simfit import render_growth
from infmon.commands.simfit_read import ServerLimits, read_session
from infmon.sim import fitio
from infmon.sim.costmodel import PARAMS, FittedCost, FittedRange, box_cox, features
from infmon.sim.growth import Growth, growth_shape
from infmon.sim.levels import Shape, replay
from infmon.sim.observation import Observation
from infmon.sim.profiles import ProfileError
from infmon.sim.roofline import PassLoad, StepLoad
from infmon.sim.scenarios import SCENARIOS, build_config
from tests.recorded import unpack_journal


@pytest.fixture(scope="module")
def wandering(tmp_path_factory) -> list[Observation]:
    """The real vLLM of 4 Dec, c = 1-16 in three rounds, with its own per-request timings."""
    session = unpack_journal("wandering-vllm", tmp_path_factory.mktemp("g") / "session")
    return read_session(session, "auto", [])[0]


def test_box_cox_runs_from_the_log_to_the_line() -> None:
    assert box_cox(1, 0.5) == 0.0 and box_cox(1, 0) == 0.0
    assert box_cox(16, 1.0) == 15.0
    assert box_cox(16, 0) == pytest.approx(math.log(16))
    assert box_cox(16, 1e-9) == pytest.approx(math.log(16), rel=1e-6)  # continuous at 0
    assert box_cox(16, 0.5) == pytest.approx(6.0)


def test_the_real_servers_growth_slows_past_c4_and_the_fit_reads_it(wandering) -> None:
    """On the real vLLM here TPOT grew ~0.3 ms per sequence to c=4, slower past it, and the
    API server's part of TTFT (the client's TTFT less the server's) slower still."""
    g = growth_shape(wandering)
    assert g.source == "fitted over c=1-16"
    assert 0.2 <= g.seq <= 0.8, g
    assert 0.1 <= g.stream <= 0.7, g


def test_levels_up_to_four_cannot_tell_and_keep_a_carried_shape_or_the_line(wandering) -> None:
    narrow = [o for o in wandering if o.concurrency <= 4]
    assert growth_shape(narrow) == Growth()  # assumed linear, and said so ("" source)
    carried = Growth(0.55, 0.25, "from wide.toml (c=1-16)")
    assert growth_shape(narrow, carried) == carried
    # the client's clock alone: TPOT's curve is read, the API server's wait is not
    client = [replace(o, source="client") for o in wandering]
    g = growth_shape(client)
    assert g.stream == 1.0 and g.seq < 1
    assert g.source == "TPOT's fitted over c=1-16; the API server's linear (assumed)"
    g = growth_shape(client, carried)
    assert g.stream == 0.25 and g.source.endswith("the API server's from wide.toml (c=1-16)")
    # two levels span 16x but there are not four of them
    assert growth_shape([o for o in wandering if o.concurrency in (1, 16)]) == Growth()


def test_a_linear_server_keeps_the_line() -> None:
    """A sweep whose TPOT and API wait grow exactly linearly (the simulator's own): no curve
    beats the line, so the exponents stay 1."""
    obs = [
        Observation(
            "lin", c, 32, 32, tpot_s=2e-3 + 0.3e-3 * c, ttft_s=5e-3 + 1.5e-3 * (c - 1) + 3e-3,
            output_tok_s=c / (2e-3 + 0.3e-3 * c), source="both",
            server_tpot_s=2e-3 + 0.3e-3 * c, server_ttft_s=3e-3,
        )
        for c in (1, 2, 4, 8, 16)
    ]  # fmt: skip
    g = growth_shape(obs)
    assert (g.seq, g.stream) == (1.0, 1.0) and g.source == "fitted over c=1-16"
    # and a curve that does slow is read as one
    bent = [replace(o, server_tpot_s=2e-3 + 0.6e-3 * math.sqrt(o.concurrency)) for o in obs]
    assert growth_shape(bent).seq == pytest.approx(0.5, abs=0.05)


def test_the_shape_goes_round_trip_and_a_profile_from_before_it_is_linear(tmp_path) -> None:
    values = tuple(1e-3 if n in ("step_s", "seq_s", "request_s") else 0.0 for n in PARAMS)
    cost = FittedCost(
        values=values,
        cov=tuple(tuple(0.0 for _ in PARAMS) for _ in PARAMS),
        sources=tuple("s" if v else "" for v in values),
        rms_rel=0.05,
        fitted_range=FittedRange((1, 16), (32.0, 32.0), (32.0, 32.0), 16),
        seq_exponent=0.55,
        stream_exponent=0.0,
        shape_from='fitted over c=1-16 "quoted"\x1b[31m',
    )
    path = tmp_path / "p.toml"
    fitio.write(cost, path)
    back = fitio.load(path)
    assert (back.seq_exponent, back.stream_exponent) == (0.55, 0.0)
    assert back.shape_from == cost.shape_from  # escaped in the file, whole again on load
    assert "\x1b" not in path.read_text()
    shown = "\n".join(render_growth(back))
    assert "\x1b" not in shown and 'fitted over c=1-16 "quoted"' in shown
    text = path.read_text()
    old = "\n".join(
        line
        for line in text.splitlines()
        if not line.startswith(("seq_exp", "stream_exp", "shape"))
    )
    path.write_text(old)
    before = fitio.load(path)
    assert (before.seq_exponent, before.stream_exponent, before.shape_from) == (1.0, 1.0, "")
    path.write_text(text.replace("stream_exponent = 0.0", "stream_exponent = 2"))
    with pytest.raises(ProfileError, match=r"stream_exponent is 2, not a number from 0 to 1"):
        fitio.load(path)


def test_the_step_and_the_replay_use_the_shape() -> None:
    values = np.zeros(len(PARAMS))
    step = StepLoad(PassLoad(16, 16, 16 * 40, 16 * 40.0), num_seqs=16)
    assert features(values, step, 0)[PARAMS.index("seq_s")] == 16
    assert features(values, step, 0, seq_exponent=0.5)[PARAMS.index("seq_s")] == 4
    base = build_config(SCENARIOS["baseline"])
    vals = {"step_s": 1e-3, "seq_s": 0.3e-3, "request_s": 3e-3, "frontend_stream_s": 1e-3}
    line = FittedCost(
        values=tuple(vals.get(n, 0.0) for n in PARAMS),
        cov=tuple(tuple(0.0 for _ in PARAMS) for _ in PARAMS),
        sources=tuple("s" for _ in PARAMS),
        rms_rel=0.01,
        fitted_range=FittedRange((1, 4), (32.0, 32.0), (32.0, 32.0), 4),
    )
    curve = replace(line, seq_exponent=0.5, stream_exponent=0.25)
    shape = Shape(16, 32, 32)
    a, b = replay(base, line, shape), replay(base, curve, shape)
    tpot = PARAMS.index("seq_s")
    assert b.tpot[tpot] < 0.5 * a.tpot[tpot]  # 16 ** 0.5 = 4 per step, not 16
    front = PARAMS.index("frontend_stream_s")
    assert b.ttft_mean[front] == pytest.approx(box_cox(16, 0.25), rel=0.05)
    assert a.ttft_mean[front] == pytest.approx(15, rel=0.05)


@pytest.fixture(scope="module")
def steady(tmp_path_factory) -> tuple[list[Observation], ServerLimits]:
    """The steadiest sweep of the same real vLLM, 4 Dec at night (``steady-vllm``)."""
    session = unpack_journal("steady-vllm", tmp_path_factory.mktemp("s") / "session")
    return read_session(session, "auto", [])


def recorded_base(server):
    """The fitted server's limits as ``sim --fit`` reads them from a recorded session."""
    from infmon.commands.simfit_read import base_config

    return base_config([server])


def held_errors(steady, carried: Growth | None, rate: bool | None = None) -> dict[str, float]:
    """``sim --fit --holdout 8,16`` on the steady sweep: each held-out figure's forecast over
    the mean of its rounds, less one (``rate`` as ``fit`` takes it)."""
    from infmon.sim.forecast import holdout
    from infmon.sim.rounds import held_levels

    obs, server = steady
    result, left = holdout(recorded_base(server), obs, {8, 16}, carried, rate)
    assert result.cost.fitted_range.concurrency == (1, 4)
    return {f"c={h.concurrency} {fig}": err for h in held_levels(left) for fig, err in h.errors}


def test_a_wider_sweeps_shape_carries_to_another_fit_and_the_line_does_not(
    steady, wandering
) -> None:
    """Issue 30's must-show on recorded rounds: fitted at c = 1, 2, 4 the line overshoots the
    steady sweep's c=16 (TPOT +32%, TTFT p50 +45%); with the growth's shape read from the
    afternoon's sweep (its own exponents, no cost carried) every figure lands within 15%."""
    line = held_errors(steady, None, rate=False)
    assert max(abs(e) for e in line.values()) > 0.25, line
    shape = growth_shape(wandering)
    carried = held_errors(steady, shape)
    assert len(carried) == 6
    assert all(abs(e) <= 0.15 for e in carried.values()), carried
