"""Speculative decoding in the fit (issue 30, must-show 4): a fitted baseline plus one spec
session names the concurrency where spec stops paying, and the simulator itself, run at
doubling concurrencies with that drafter, crosses over within one doubling of it."""

from __future__ import annotations

import math

import pytest

from infmon.cli import main
from infmon.sim import fitio
from infmon.sim.fit import fit, with_cost
from infmon.sim.levels import Shape, measure
from infmon.sim.observation import Observation
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sim.spec_fit import break_even

# a baseline and a spec session replayed and fitted (~80 s on CI): CI's slow tier runs it, the
# module's tests on one worker (--dist loadgroup) so that the fit is made once
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("sim_spec_fit")]

PROMPT, OUTPUT = 128, 64


def observe(cfg, session: str, prompt: int, c: int) -> Observation:
    f = measure(cfg, Shape(c, prompt, OUTPUT))
    return Observation(
        session,
        c,
        prompt,
        OUTPUT,
        f.tpot_s,
        f.ttft_mean_s,
        f.output_tok_s,
        len(f.acceptance),
        f.acceptance,
    )


@pytest.fixture(scope="module")
def configs():
    return build_config(SCENARIOS["baseline"]), build_config(SCENARIOS["spec-good"])


@pytest.fixture(scope="module")
def fitted(configs):
    base, spec = configs
    data = [observe(base, f"P{p}", p, c) for p in (PROMPT, 1024) for c in (1, 4, 16, 32)]
    data += [observe(spec, "spec", PROMPT, c) for c in (1, 4, 16)]
    return fit(base, data)


def simulator_crossover(base, spec) -> float:
    """Where the simulator's own spec/no-spec output tok/s ratio crosses 1 (log2-interpolated
    between doubling levels)."""
    prev = None
    for e in range(10):
        c = 2**e
        ratio = (
            measure(spec, Shape(c, PROMPT, OUTPUT)).output_tok_s
            / measure(base, Shape(c, PROMPT, OUTPUT)).output_tok_s
        )
        if ratio <= 1 and prev is not None:
            frac = (prev - 1) / (prev - ratio)
            return float(2 ** (e - 1 + frac))
        prev = ratio
    raise AssertionError("the simulator's spec never stopped paying up to c=512")


def test_spec_session_gives_drafter_cost_and_acceptance(fitted):
    c = fitted.cost
    assert c.speculative_k == 4 and len(c.acceptance) == 4
    assert c.value("draft_pass_s") > 0 and c.stderr("draft_pass_s") > 0
    assert c.sources[-2] == "spec"
    spec_rows = [r for r in fitted.residuals if r.observation.session == "spec"]
    assert len(spec_rows) == 9 and all(abs(r.relative) < 0.2 for r in spec_rows)


def test_break_even_within_one_doubling_of_the_simulator(configs, fitted):
    base, spec = configs
    cost = fitted.cost
    shape = Shape(1, PROMPT, OUTPUT, cost.speculative_k, cost.acceptance)
    be = break_even(with_cost(base, cost), cost, shape)
    assert be.concurrency is not None, be.lines()
    truth = simulator_crossover(base, spec)
    assert abs(math.log2(be.concurrency) - math.log2(truth)) <= 1.0, (be.lines(), truth)


def test_break_even_from_the_command_line(fitted, tmp_path, capsys):
    profile = tmp_path / "spec.toml"
    fitio.write(fitted.cost, profile)
    args = ["sim", "--predict", "--fitted", str(profile), "--speculative-k", "4"]
    assert main([*args, "--break-even", "--prompt-tokens", "128", "--output-tokens", "64"]) == 0
    out = capsys.readouterr().out
    assert "break-even: spec stops paying at about c=" in out
