"""Fit the step-cost model (``infmon.sim.costmodel``) to a server's recorded levels.

Each observation is one level of a session: concurrency, prompt and output length, and what the
client measured (mean TPOT, median TTFT, output tokens/s). Each level is replayed through the
engine (``infmon.sim.levels``), giving its three figures as vectors ``a`` with ``a @ values``
their value; least squares on the relative residuals ``(a @ values - y) / y`` gives new values.
The replay's schedule (which steps prefill, which side of the roofline a step is on) depends on
the values, so replay and solve alternate until the values settle (a Gauss-Newton iteration).

Costs are non-negative (a negative one is held at zero and said). A parameter the sessions do
not determine (``kv_token_s`` and ``seq_s`` need two prompt lengths to be told apart) is held
near a neutral split by a faint ridge, and its standard error says it is undetermined. The
covariance is ``(A'A / s^2 + PRIOR_PRECISION)^-1`` with ``s`` the residual scatter, never below
``NOISE_FLOOR`` (a run-to-run spread of real measurements).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from infmon.sim.costmodel import (
    API_SERVERS,
    I_COMPUTE,
    I_FRONT_STREAM,
    I_KV,
    I_REQUEST,
    I_SEQ,
    I_STEP,
    I_WEIGHTS,
    PARAMS,
    SPEC_PARAMS,
    FittedCost,
    FittedRange,
)
from infmon.sim.growth import Growth, fit_growth, wave_exponent
from infmon.sim.levels import LevelVectors, replay
from infmon.sim.observation import Observation, conditional_acceptance
from infmon.sim.roofline import EngineConfig

NOISE_FLOOR = 0.01
"""Relative scatter assumed at least (1%): a perfect fit still has error bars."""
SERIAL_MARGIN = 0.9
"""A serial API server is kept only when it fits with a scatter at least 10% smaller than a
concurrent one: on a simulator session (a concurrent API server) the two came within 4% of
each other; on the real vLLM here serial scattered 0.53-0.78x as much in four fits of three
sessions and forecast the held-out c=8/16 better on each session checked."""
RIDGE = 1e-6
"""Relative weight of the neutral split for directions the data leaves open (the estimate)."""
PRIOR_PRECISION = 1.0
"""The covariance's prior: one cost explains about one figure at most (unit variance on the
normalised scale), so a cost the data leaves open gets a band of its own size, not infinity."""
SPLITS = (0.9, 0.5, 0.1)
"""Shares of the decode step's fixed cost given to the weights at the roofline fit's starts."""
RUNS = 1
"""Starts carried on to convergence (the best after one step each) for a concurrent API server;
a serial one carries every start on: its queue makes the objective piecewise, and on exact data
from a serial replay only a late start reached the truth (the first left a 4% scatter and
``request_s`` +13%)."""


class FitError(ValueError):
    """Observations that cannot be fitted (too few, or nothing measured)."""


@dataclass(frozen=True, slots=True)
class Residual:
    observation: Observation
    figure: str  # one of infmon.sim.observation.FIGURES
    measured: float
    fitted: float

    @property
    def relative(self) -> float:
        return self.fitted / self.measured - 1.0


@dataclass(frozen=True, slots=True)
class FitResult:
    cost: FittedCost
    residuals: tuple[Residual, ...]
    iterations: int
    held_at_zero: tuple[str, ...]
    unseen: tuple[str, ...] = ()  # costs no replayed step used: a neutral guess, not fitted
    api_scatter: tuple[tuple[str, float], ...] = ()  # each API server shape tried: its scatter


@dataclass(frozen=True, slots=True)
class _Form:
    """What a fit holds fixed while it solves for the costs: the API server's shape, the
    growth's, and the closed loop's wave exponent (each read once from the observations)."""

    api: str
    growth: Growth
    waves: float


def vector(vec: LevelVectors, figure: str) -> np.ndarray:
    """A figure's cost vector (``tok_s``: seconds per output token). The server's TTFT and
    TPOT run on its engine clock (queued → first token, emitted token to token), the client's
    as it reads the streams."""
    return {
        "tpot": vec.tpot,
        "ttft": vec.ttft_mean,
        "tok_s": vec.time_per_token,
        "server_tpot": vec.tpot,
        "server_ttft": vec.queue_ttft_mean,
        "server_prefill": vec.prefill,
    }[figure]


def initial_values(obs: list[Observation], rate: bool = False) -> np.ndarray:
    """A neutral start: half the lowest TPOT each to host and weights, a little per sequence,
    compute-bound only for big chunks, the API server a third of the lowest TTFT."""
    tpot = min(o.tpot_s for o in obs)
    ttft = min(o.ttft_s for o in obs)
    v = np.zeros(len(PARAMS))
    v[I_STEP] = v[I_WEIGHTS] = tpot / 2
    v[I_SEQ] = tpot * tpot / 100 if rate else tpot / 100  # rate: seconds per sequence/second
    v[I_KV] = tpot / 1e5
    v[I_COMPUTE] = tpot / 256
    v[I_REQUEST] = ttft / 3
    if _timed_both(obs):
        v[I_FRONT_STREAM] = ttft / 30
    return v


def _solve(
    a: np.ndarray, free: list[int], prior: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """Least squares of ``a[:, free] @ x = 1`` with a faint ridge toward ``prior``; returns
    (values, covariance over all PARAMS, residual scale)."""
    sub = a[:, free]
    norms = np.linalg.norm(sub, axis=0)
    norms[norms == 0] = 1.0
    scaled = sub / norms
    ridge = np.sqrt(RIDGE) * np.eye(len(free))
    lhs = np.vstack([scaled, ridge])
    rhs = np.concatenate([np.ones(len(a)), ridge @ (prior[free] * norms)])
    x, *_ = np.linalg.lstsq(lhs, rhs, rcond=None)
    resid = scaled @ x - 1.0
    dof = max(len(a) - len(free), 1)
    s = max(float(np.sqrt(resid @ resid / dof)), NOISE_FLOOR)
    return x / norms, covariance(a, free, s), s


def covariance(a: np.ndarray, idx: list[int], s: float) -> np.ndarray:
    """The covariance over all PARAMS of the costs ``idx`` (zero elsewhere), residual scale ``s``."""
    sub = a[:, idx]
    norms = np.linalg.norm(sub, axis=0)
    norms[norms == 0] = 1.0
    scaled = sub / norms
    inv = np.linalg.pinv(scaled.T @ scaled / s**2 + PRIOR_PRECISION * np.eye(len(idx)))
    cov = np.zeros((len(PARAMS), len(PARAMS)))
    cov[np.ix_(idx, idx)] = inv / np.outer(norms, norms)
    return cov


def _timed_both(obs: list[Observation]) -> bool:
    """Whether some level carries both clocks' TTFT: only then is the API server's wait per
    open stream told apart from the engine's queue (which also grows with the streams)."""
    return any(o.source == "both" for o in obs)


ATTN_PROMPT_RATIO = 2.0
"""Attention's cost per pair is fitted only when the sessions' prompts differ this much: at one
prompt length a prefill's pairs grow with its tokens and the two cannot be told apart."""


def _two_prompt_lengths(obs: list[Observation]) -> bool:
    prompts = [o.prompt_tokens for o in obs]
    return max(prompts) >= ATTN_PROMPT_RATIO * min(prompts)


def _free(obs: list[Observation]) -> list[int]:
    spec = any(o.speculative_k for o in obs)
    both, attn = _timed_both(obs), _two_prompt_lengths(obs)
    return [
        i
        for i, name in enumerate(PARAMS)
        if (spec or name not in SPEC_PARAMS)
        and (both or name != "frontend_stream_s")
        and (attn or name != "attn_pair_s")
    ]


def _design(
    base: EngineConfig, cost: FittedCost, obs: list[Observation], by_kind: bool = False
) -> tuple[np.ndarray, list[LevelVectors]]:
    vecs = [replay(base, cost, o.shape, by_kind) for o in obs]
    rows = []
    for o, vec in zip(obs, vecs, strict=True):
        for figure, y in o.targets():
            rows.append(vector(vec, figure) / y)
    return np.asarray(rows), vecs


def fit(
    base: EngineConfig,
    obs: list[Observation],
    max_iterations: int = 30,
    carried: Growth | None = None,
    rate: bool | None = None,
) -> FitResult:
    """Fit ``obs`` (one or more sessions); ``base`` gives the server's limits (KV blocks,
    ``max_num_seqs``, ``max_num_batched_tokens``). Each of the API server's shapes
    (``API_SERVERS``) is fitted; serial is kept when its relative scatter is clearly smaller
    (``SERIAL_MARGIN``), and both scatters are reported. The growth's shapes are the levels'
    own where they span enough (``growth_shape``), else ``carried`` (an earlier profile's),
    else the rate form (``costmodel``: with the tokens streamed per second); ``rate`` True or
    False asks for that form or for the line instead of the last."""
    obs = [o for o in obs if o.tpot_s > 0 and o.ttft_s > 0 and o.output_tok_s > 0]
    if len(obs) < 2:
        raise FitError("a fit needs at least two measured levels (TPOT, TTFT and tokens/s)")
    growth, waves = fit_growth(obs, carried, rate), wave_exponent(obs)
    fits = {
        api: _fit_api(base, obs, _Form(api, growth, waves), max_iterations) for api in API_SERVERS
    }
    best = fits["concurrent"][0]  # unless serial is clearly the better account of the data
    if fits["serial"][0].scale < SERIAL_MARGIN * best.scale:
        best = fits["serial"][0]
    return FitResult(
        best.cost,
        best.residuals(),
        sum(n for _, n in fits.values()),
        best.zeroed,
        best.unseen,
        tuple((api, f.scale) for api, (f, _) in fits.items()),
    )


def _fit_api(
    base: EngineConfig,
    obs: list[Observation],
    form: _Form,
    max_iterations: int,
) -> tuple[_State, int]:
    prior = initial_values(obs, form.growth.rate)
    start = _State(base, obs, prior, _free(obs), form, by_kind=True)
    it = 0
    for it in range(1, max_iterations + 1):  # noqa: B007 (the count is reported)
        if not start.improve(prior):
            break
    best: _State | None = None
    starts = _starts(base, obs, start.values, prior, form)
    for state in starts if form.api == "serial" else starts[:RUNS]:
        for _ in range(max_iterations):
            if not state.improve(prior):
                break
            it += 1
        if best is None or state.obj < best.obj:
            best = state
    assert best is not None
    return best, it


def _starts(
    base: EngineConfig,
    obs: list[Observation],
    values: np.ndarray,
    prior: np.ndarray,
    form: _Form,
) -> list[_State]:
    """The roofline's fit has more than one basin (how the decode step's fixed cost splits
    between host and weights, how much of TTFT is the API server): one Gauss-Newton step
    from each of a few starts, best first."""
    ttft = min(o.ttft_s for o in obs)
    states = []
    for share in SPLITS:
        for front in SPLITS:
            v = _resplit(values, share)
            v[I_REQUEST] = front * ttft
            state = _State(base, obs, v, _free(obs), form)
            state.improve(prior)
            states.append(state)
    return sorted(states, key=lambda s: s.obj)


def _resplit(values: np.ndarray, share: float = 0.5) -> np.ndarray:
    """The decode step's fixed cost shared between host and weights again: a by-kind start
    can leave one of them at zero, where the roofline's memory side is never taken."""
    out = values.copy()
    fixed = values[I_STEP] + values[I_WEIGHTS]
    out[I_STEP], out[I_WEIGHTS] = fixed * (1 - share), fixed * share
    return out


def _objective(a: np.ndarray, values: np.ndarray) -> float:
    r = a @ values - 1.0
    return float(r @ r)


class _State:
    """The current values, their replayed design, and one damped Gauss-Newton step."""

    def __init__(
        self,
        base: EngineConfig,
        obs: list[Observation],
        values: np.ndarray,
        free: list[int],
        form: _Form,
        by_kind: bool = False,
    ) -> None:
        self.base, self.obs, self.all_free, self.by_kind = base, obs, free, by_kind
        self.form = form
        self.free = list(free)
        self.zeroed: tuple[str, ...] = ()
        self.unseen: tuple[str, ...] = ()
        self.cov, self.scale = np.zeros((len(PARAMS),) * 2), NOISE_FLOOR
        self._set(values)

    def _set(self, values: np.ndarray) -> None:
        self.values = values
        self.cost = _cost(
            self.base, self.obs, values, self.cov, self.scale, self._fitted(), self.form
        )
        self.a, self.vecs = _design(self.base, self.cost, self.obs, self.by_kind)
        self.obj = _objective(self.a, values)

    def _nnls(self, prior: np.ndarray) -> np.ndarray:
        seen = np.linalg.norm(self.a, axis=0) > 0
        free, zeroed = [i for i in self.all_free if seen[i]], []
        self.unseen = tuple(PARAMS[i] for i in self.all_free if not seen[i])
        while True:
            x, cov, s = _solve(self.a, free, prior)
            if (x >= 0).all():
                break
            worst = free[int(np.argmin(x))]
            free.remove(worst)
            zeroed.append(PARAMS[worst])
        if zeroed:  # a cost held at zero keeps its band: the data bound it, not to exactly 0
            cov = covariance(self.a, [i for i in self.all_free if seen[i]], s)
        self.free, self.zeroed, self.cov, self.scale = free, tuple(zeroed), cov, s
        new = self.values.copy()  # a cost no step used keeps its neutral guess
        new[[i for i in self.all_free if seen[i]]] = 0.0
        new[free] = x
        return new

    def improve(self, prior: np.ndarray, tol: float = 1e-5) -> bool:
        """One step; False when no step lowers the objective by more than ``tol``."""
        target = self._nnls(prior)
        kept = self.values, self.a, self.vecs, self.obj
        for t in (1.0, 0.5, 0.25, 0.125, 0.0625):
            self._set(kept[0] + t * (target - kept[0]))
            if self.obj < kept[3] * (1 - tol) - 1e-15:
                return True
        # the design of the values kept, as replayed before (a replay depends on the values
        # and the form alone, so replaying them again would give the same rows)
        self.values, self.a, self.vecs, self.obj = kept
        self.cost = _cost(
            self.base, self.obs, self.values, self.cov, self.scale, self._fitted(), self.form
        )
        return False

    def _fitted(self) -> list[int]:
        """Costs the sessions determined (zero included: the data asked for less)."""
        return self.free + [PARAMS.index(z) for z in self.zeroed]

    def residuals(self) -> tuple[Residual, ...]:
        return _residuals(self.obs, self.vecs, self.values)


def _residuals(
    obs: list[Observation], vecs: list[LevelVectors], values: np.ndarray
) -> tuple[Residual, ...]:
    out = []
    for o, vec in zip(obs, vecs, strict=True):
        for figure, _ in o.targets():
            fitted = float(vector(vec, figure) @ values)
            if figure == "tok_s":
                fitted = 1.0 / fitted
            out.append(Residual(o, figure, o.measured(figure), fitted))
    return tuple(out)


def _cost(
    base: EngineConfig,
    obs: list[Observation],
    values: np.ndarray,
    cov: np.ndarray,
    s: float,
    free: list[int],
    form: _Form,
) -> FittedCost:
    spec = [o for o in obs if o.speculative_k]
    by_kind = {
        "": sorted({o.session for o in obs}),
        "spec": sorted({o.session for o in spec}),
        "both": sorted({o.session for o in obs if o.source == "both"}),
    }
    kind = {name: "spec" for name in SPEC_PARAMS} | {"frontend_stream_s": "both"}
    sources = tuple(
        ", ".join(by_kind[kind.get(name, "")]) if i in free else "" for i, name in enumerate(PARAMS)
    )
    rng = FittedRange(
        concurrency=(min(o.concurrency for o in obs), max(o.concurrency for o in obs)),
        prompt_tokens=(min(o.prompt_tokens for o in obs), max(o.prompt_tokens for o in obs)),
        output_tokens=(min(o.output_tokens for o in obs), max(o.output_tokens for o in obs)),
        batch_max=max(o.concurrency for o in obs),
        spec_k=tuple(sorted({o.speculative_k for o in spec})),
        output_spread=float(np.median([o.output_spread / o.output_tokens for o in obs])),
    )
    acceptance: tuple[float, ...] = ()
    k = max((len(o.acceptance) for o in spec), default=0)
    rows = [o.acceptance for o in spec if len(o.acceptance) == k and k]
    if rows:  # the spec levels' per-position rates, averaged, as conditional acceptance
        acceptance = conditional_acceptance(
            tuple(float(np.mean(col)) for col in zip(*rows, strict=True))
        )
    return FittedCost(
        values=tuple(float(v) for v in values),
        cov=tuple(tuple(float(x) for x in row) for row in cov),
        sources=sources,
        rms_rel=s,
        fitted_range=rng,
        acceptance=acceptance,
        speculative_k=spec[0].speculative_k if spec else 0,
        kv_capacity_tokens=base.num_gpu_blocks * base.block_size if base.num_gpu_blocks else 0,
        block_size=base.block_size,
        max_model_len=base.max_model_len,
        max_num_seqs=base.max_num_seqs,
        max_num_batched_tokens=base.max_num_batched_tokens,
        targets=", ".join(sorted({o.source for o in obs})),
        api_server=form.api,
        wave_exponent=form.waves,
        growth="rate" if form.growth.rate else "line",
        seq_exponent=form.growth.seq,
        stream_exponent=form.growth.stream,
        shape_from=form.growth.source,
    )


def with_cost(base: EngineConfig, cost: FittedCost) -> EngineConfig:
    """The server a fitted profile describes (its limits, its costs)."""
    blocks = cost.kv_capacity_tokens // cost.block_size if cost.kv_capacity_tokens else None
    return replace(
        base,
        fitted=cost,
        num_gpu_blocks=blocks if blocks else base.num_gpu_blocks,
        block_size=cost.block_size,
        max_model_len=cost.max_model_len or base.max_model_len,
        max_num_seqs=cost.max_num_seqs,
        max_num_batched_tokens=cost.max_num_batched_tokens,
    )
