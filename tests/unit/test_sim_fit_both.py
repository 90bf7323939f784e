"""`--targets both`: the client's figures and the server's own (vLLM's per-request timings) in
one fit. The API server's wait per other open stream (``frontend_stream_s``) shows only in the
gap between the two clocks: a fit with both recovers it, a fit to the client's alone leaves it
at zero and unfitted (the engine's queue also grows with the streams; one clock cannot tell).

The observations are the replay's own figures under known costs (the shape of the real vLLM
here: a 2 ms step, 5 ms before scheduling, 1 ms per other stream), so the truth is exact.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from infmon.sim.costmodel import PARAMS, FittedCost, FittedRange
from infmon.sim.fit import fit, vector
from infmon.sim.levels import Shape, replay
from infmon.sim.observation import Observation
from infmon.sim.scenarios import SCENARIOS, build_config

TRUTH = {
    "step_s": 2.0e-3,
    "seq_s": 0.1e-3,
    "weights_s": 0.2e-3,
    "kv_token_s": 2e-6,
    "compute_token_s": 30e-6,
    "request_s": 5e-3,
    "frontend_stream_s": 1e-3,
}
LEVELS = (1, 2, 4, 8)


@pytest.fixture(scope="module")
def base():
    return replace(build_config(SCENARIOS["baseline"]), enable_prefix_caching=False)


def truth(values: dict[str, float] = TRUTH, api_server: str = "concurrent") -> FittedCost:
    """Known costs (``values``, the rest zero) as a profile with no uncertainty."""
    n = len(PARAMS)
    return FittedCost(
        values=tuple(values.get(p, 0.0) for p in PARAMS),
        cov=tuple(tuple(0.0 for _ in range(n)) for _ in range(n)),
        sources=tuple("truth" for _ in PARAMS),
        rms_rel=0.0,
        fitted_range=FittedRange((1, 8), (32.0, 32.0), (32.0, 32.0), 8),
        api_server=api_server,
    )


def observe(base, c: int, cost: FittedCost | None = None, session: str = "both") -> Observation:
    """The level's figures, both clocks, exactly as the replay prices them under ``cost``."""
    cost = cost or truth()
    vec = replay(base, cost, Shape(c, 32, 32))
    fig = {f: float(vector(vec, f) @ cost.vector) for f in ("tpot", "ttft", "tok_s")}
    fig |= {f: float(vector(vec, f) @ cost.vector) for f in ("server_ttft", "server_prefill")}
    return Observation(
        session, c, 32, 32, fig["tpot"], fig["ttft"], 1.0 / fig["tok_s"],
        source="both", server_tpot_s=fig["tpot"], server_ttft_s=fig["server_ttft"],
        server_prefill_s=fig["server_prefill"],
    )  # fmt: skip


@pytest.fixture(scope="module")
def observations(base):
    return [observe(base, c) for c in LEVELS]


def test_both_clocks_recover_the_api_servers_wait_per_stream(base, observations):
    result = fit(base, observations)
    c = result.cost
    assert c.targets == "both"
    assert c.value("frontend_stream_s") == pytest.approx(TRUTH["frontend_stream_s"], rel=0.05)
    assert c.value("request_s") == pytest.approx(TRUTH["request_s"], rel=0.05)
    assert c.sources[PARAMS.index("frontend_stream_s")] == "both"
    # the simulator's growth is linear: its levels span 8x, and no curve beats the line
    assert (c.seq_exponent, c.stream_exponent, c.shape_from) == (1.0, 1.0, "fitted over c=1-8")
    assert all(abs(r.relative) < 0.02 for r in result.residuals)
    assert {r.figure for r in result.residuals} == {
        "tpot", "ttft", "tok_s", "server_tpot", "server_ttft", "server_prefill",
    }  # fmt: skip


def test_the_clients_clock_alone_leaves_it_unfitted(base, observations):
    client = [replace(o, source="client") for o in observations]
    c = fit(base, client).cost
    i = PARAMS.index("frontend_stream_s")
    assert c.values[i] == 0.0 and not c.sources[i]
    assert np.isclose(c.stderr("frontend_stream_s"), 0.0)
