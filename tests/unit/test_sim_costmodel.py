"""The fitted step cost: its TOML round trip, what-if scaling (FP8 weights) with its
covariance, and a forecast that uses it (no fit here: the costs are given)."""

from __future__ import annotations

import numpy as np
import pytest

from infmon.sim import fitio
from infmon.sim.costmodel import PARAMS, FittedCost, FittedRange
from infmon.sim.fit import with_cost
from infmon.sim.forecast import forecast
from infmon.sim.levels import Shape
from infmon.sim.profiles import ProfileError
from infmon.sim.scenarios import SCENARIOS, build_config

VALUES = {
    "step_s": 1e-3,
    "seq_s": 20e-6,
    "weights_s": 15e-3,
    "kv_token_s": 7e-8,
    "compute_token_s": 60e-6,
    "request_s": 0.04,
}


def cost() -> FittedCost:
    values = tuple(VALUES.get(n, 0.0) for n in PARAMS)
    se = np.array([v * 0.05 for v in values])
    return FittedCost(
        values=values,
        cov=tuple(tuple(float(x) for x in row) for row in np.diag(se**2)),
        sources=tuple("s1" if n in VALUES else "" for n in PARAMS),
        rms_rel=0.01,
        fitted_range=FittedRange((1, 8), (128.0, 128.0), (64.0, 64.0), 8),
        kv_capacity_tokens=65536,
        max_model_len=4096,
    )


def test_toml_round_trip_keeps_every_number(tmp_path):
    path = tmp_path / "p.toml"
    fitio.write(cost(), path)
    back = fitio.load(path)
    assert back.values == cost().values and back.cov == cost().cov
    assert back.sources == cost().sources and back.fitted_range == cost().fitted_range
    assert back.kv_capacity_tokens == 65536


def test_the_fitted_waves_go_round_trip_and_a_profile_from_before_them_is_lockstep(tmp_path):
    from dataclasses import replace

    path = tmp_path / "p.toml"
    fitio.write(replace(cost(), wave_exponent=0.34), path)
    assert fitio.load(path).wave_exponent == 0.34
    text = path.read_text()
    old = "\n".join(line for line in text.splitlines() if not line.startswith("wave_exponent"))
    path.write_text(old)
    assert fitio.load(path).wave_exponent == 1.0  # every user together, as before the waves
    for bad in ("1.5", "-0.1", '"half"', "true"):
        path.write_text(text.replace("wave_exponent = 0.34", f"wave_exponent = {bad}"))
        with pytest.raises(ProfileError, match=r"wave_exponent is .*, not a number from 0 to 1"):
            fitio.load(path)


@pytest.mark.parametrize(
    "missing", [("frontend_stream_s",), ("attn_pair_s",), ("frontend_stream_s", "attn_pair_s")]
)
def test_a_profile_from_before_a_cost_existed_still_loads(tmp_path, missing):
    """Profiles written before ``frontend_stream_s`` (the API server's wait per stream) or
    ``attn_pair_s`` (attention) existed, with a covariance without them, read as those costs at
    zero, not fitted; every other number in its place."""
    import re

    old = [n for n in PARAMS if n not in missing]
    at = [PARAMS.index(n) for n in missing]
    text = fitio.dumps(cost())
    for name in missing:
        text = re.sub(rf"\n\[params\.{name}\][^\[]*", "\n", text)
        text = text.replace(f', "{name}"', "")
    cov = np.delete(np.delete(np.asarray(cost().cov), at, 0), at, 1)
    rows = ", ".join("[" + ", ".join(repr(float(x)) for x in r) + "]" for r in cov)
    text = re.sub(r"matrix = .*", f"matrix = [{rows}]", text)
    path = tmp_path / "old.toml"
    path.write_text(text)
    back = fitio.load(path)
    for name, i in zip(missing, at, strict=True):
        assert back.value(name) == 0.0 and back.sources[i] == ""
    assert [back.value(n) for n in old] == [cost().value(n) for n in old]
    assert back.stderr("step_s") == pytest.approx(cost().stderr("step_s"))


def test_attention_pairs_price_a_compute_bound_step():
    """A prefill chunk's time is its tokens and their attention pairs on the compute side;
    a decode step reads memory and its pairs cost nothing there."""
    from infmon.sim.costmodel import features
    from infmon.sim.roofline import PassLoad, StepLoad

    v = np.array([VALUES.get(n, 0.0) for n in PARAMS])
    v[PARAMS.index("attn_pair_s")] = 1e-9
    chunk = StepLoad(PassLoad(2048, 1, 2048, 2048 * 1024.0), 1, prefill_tokens=2048)
    phi = features(v, chunk, 0)
    assert phi[PARAMS.index("attn_pair_s")] == 2048 * 1024.0
    assert phi[PARAMS.index("compute_token_s")] == 2048 and phi[PARAMS.index("kv_token_s")] == 0
    decode = StepLoad(PassLoad(8, 8, 8 * 1024, 8 * 1024.0), 8)
    phi = features(v, decode, 0)
    assert phi[PARAMS.index("attn_pair_s")] == 0 and phi[PARAMS.index("kv_token_s")] == 8 * 1024


def test_a_file_that_is_not_a_fitted_profile_is_refused(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text('name = "A100"\n')
    with pytest.raises(ProfileError, match="not a fitted profile"):
        fitio.load(path)


def test_fp8_weights_shrink_the_memory_bound_step_and_its_variance():
    fp8 = cost().scaled({"weights_s": 0.5})
    assert fp8.value("weights_s") == pytest.approx(7.5e-3)
    assert fp8.stderr("weights_s") == pytest.approx(cost().stderr("weights_s") / 2)
    base = with_cost(build_config(SCENARIOS["baseline"]), cost())
    shape = Shape(4, 128, 64)
    before, after = forecast(base, cost(), shape), forecast(base, fp8, shape)
    saved = before.tpot_s.value - after.tpot_s.value
    assert saved == pytest.approx(7.5e-3, rel=0.1)  # decode steps are memory-bound here
    assert after.output_tok_s.value > before.output_tok_s.value
    assert before.outside == ()


@pytest.mark.parametrize("growth", ["line", "rate"])
@pytest.mark.parametrize("seq_exponent", [1.0, 0.6])
def test_a_steps_time_is_its_cost_vector_times_the_values(growth, seq_exponent):
    """``step_time_s`` (the engine's clock under a fitted cost) and ``features @ values`` (the
    fit's derivatives) are one figure, computed apart for speed: on both sides of the roofline,
    with drafting, in both forms, at a bent exponent."""
    from dataclasses import replace

    from infmon.sim.costmodel import features, step_time_s
    from infmon.sim.roofline import PassLoad, StepLoad

    vals = VALUES | {"attn_pair_s": 1e-9, "draft_pass_s": 2e-3, "draft_seq_s": 5e-5}
    c = replace(
        cost(), values=tuple(vals.get(n, 0.0) for n in PARAMS), growth=growth,
        seq_exponent=seq_exponent,
    )  # fmt: skip
    steps = [
        StepLoad(PassLoad(2048, 1, 2048, 2048 * 1024.0), 1, prefill_tokens=2048),  # computes
        StepLoad(PassLoad(8, 8, 8 * 1024, 8 * 1024.0), 8),  # reads memory
        StepLoad(PassLoad(4 * 5, 4 * 5, 4 * 900, 4 * 5 * 900.0), 4, 4, 4 * 900),  # drafts
        StepLoad(PassLoad(0, 0, 0, 0.0), 0),
    ]
    for step in steps:
        for k in (0, 4):
            phi = features(c.vector, step, k, seq_exponent=seq_exponent, rate=growth == "rate")
            assert step_time_s(c, step, k) == pytest.approx(float(phi @ c.vector), rel=1e-12)
    assert step_time_s(c, steps[0], 0) > 2048 * vals["compute_token_s"]
    drafting = step_time_s(c, steps[2], 4) - step_time_s(c, steps[2], 0)
    pays = 4 * (vals["draft_pass_s"] + 4 * vals["draft_seq_s"])
    if growth == "line":
        assert drafting == pytest.approx(pays, rel=1e-12)
    else:  # a longer step streams its sequences more slowly: seq_s's share shrinks
        assert 0 < drafting < pays
