"""The API server's shape in a fitted replay (``FittedCost.api_server``): ``concurrent`` takes
every request's ``request_s`` at once, ``serial`` (vLLM's one event loop) one after another.

A closed loop with fixed lengths sends in waves: every stream of a wave finishes in the same
step and sends again at once. With a concurrent API server the wave reaches the engine together,
prefills together and decodes in lockstep with the engine idle between waves, which no real vLLM
does: on the real one here it fitted with a 9.6-16.4% scatter, serial with 5.6-9.0%. Serial
spreads a wave by ``request_s`` a request, so prefills land among other streams' decodes.

Observations are the replay's own figures under known costs, so the truth is exact.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from infmon.sim import fitio
from infmon.sim.costmodel import FittedCost
from infmon.sim.fit import fit
from infmon.sim.levels import Shape, _Replay, level_config
from infmon.sim.profiles import ProfileError
from infmon.sim.scenarios import SCENARIOS, build_config
from tests.unit.test_sim_fit_both import observe, truth

TRUTH = {
    "step_s": 1.0e-3,
    "seq_s": 0.15e-3,
    "compute_token_s": 20e-6,
    "request_s": 3.5e-3,
    "frontend_stream_s": 0.5e-3,
}
LEVELS = (1, 2, 4)


@pytest.fixture(scope="module")
def base():
    return replace(build_config(SCENARIOS["baseline"]), enable_prefix_caching=False)


def cost(api: str) -> FittedCost:
    return truth(TRUTH, api)


def arrivals_per_step(base, api: str, c: int) -> float:
    """How many requests the engine takes in at once, on average, after the first wave."""
    run = _Replay(level_config(base, cost(api), Shape(c, 32, 32)), Shape(c, 32, 32))
    run.run()
    times = sorted(t for n, (t, _) in run.arrive.items() if n >= c)
    return len(times) / len(set(times))


def test_a_serial_api_server_spreads_the_closed_loops_waves(base):
    assert arrivals_per_step(base, "concurrent", 8) == pytest.approx(8.0)
    assert arrivals_per_step(base, "serial", 8) < 2.0


def test_the_fit_tells_a_serial_api_server_and_recovers_its_costs(base):
    # a server priced by the line (one cost per sequence, one wait per open stream): c = 1, 2,
    # 4 cannot show that shape, so the fit is asked for it (unasked it takes the rate form)
    obs = [observe(base, c, cost("serial"), "serial") for c in LEVELS]
    result = fit(base, obs, rate=False)
    c = result.cost
    assert c.api_server == "serial" and c.growth == "line"
    scatter = dict(result.api_scatter)
    assert set(scatter) == {"concurrent", "serial"}
    assert scatter["serial"] < scatter["concurrent"]
    for name in ("request_s", "frontend_stream_s"):
        assert c.value(name) == pytest.approx(TRUTH[name], rel=0.05), name
    # c = 1, 2, 4 of one prompt length leave the engine's per-step and per-sequence split
    # loose (vLLM's queued → first token is the prefill step alone: it stamps a request
    # queued when its loop takes it in, between steps); the fit says so in its band
    assert abs(c.value("seq_s") - TRUTH["seq_s"]) <= 1.96 * c.stderr("seq_s")
    assert c.stderr("seq_s") < 0.15 * c.value("seq_s")


def test_the_profile_keeps_the_api_server(tmp_path: Path):
    path = tmp_path / "p.toml"
    path.write_text(fitio.dumps(cost("serial")))
    assert fitio.load(path).api_server == "serial"
    text = path.read_text()
    path.write_text(text.replace('api_server = "serial"', 'api_server = "threaded"'))
    with pytest.raises(ProfileError, match=r"p\.toml.*api_server"):
        fitio.load(path)
    old = "\n".join(line for line in text.splitlines() if not line.startswith("api_server"))
    path.write_text(old)
    assert fitio.load(path).api_server == "concurrent"  # a profile from before the choice


def test_the_replay_counts_half_the_step_a_request_lands_in(base):
    """A request that reaches the scheduler while a step runs waits for its end; the replay's
    closed loop lands every request at the same point in a step, a real server's jitter
    anywhere in it: the client's TTFT counts half the step in progress, the server's starts
    when the engine takes the request in (vLLM's queued)."""
    shape = Shape(4, 32, 32)
    run = _Replay(level_config(base, cost("serial"), shape), shape)
    run.run()
    mid = [n for n in run.measured() if run.arrive[n][0] < run.admitted[n][0]]
    assert mid, "no request landed inside a step"
    starts = sorted(run.starts)
    for n in mid:
        at, taken = run.arrive[n][0], run.admitted[n][0]
        step_start = max(s for s in starts if s <= at)
        assert run.door[n][0] == pytest.approx(at + (taken - step_start) / 2)
        api, half, engine = at - run.sent_s[n], (taken - step_start) / 2, run.first[n][0] - taken
        assert run.first[n][0] - run.seen_sent(n)[0] == pytest.approx(api + half + engine)
