"""A step-cost model fitted to one server (``infmon sim --fit``), in place of the roofline of
datasheet figures: the same shape with every number measured on the operator's own server.

One engine step costs ``step_s + seq_s x running + max(weights_s + kv_token_s x context read,
compute_token_s x query tokens + attn_pair_s x attention pairs)``: host work per step and per
running sequence, then the forward pass, memory-bound (the weights and every scheduled context's
KV) or compute-bound (prefill chunks, verification, big batches) whichever is slower, as vLLM's
kernels are. Attention's pairs (each query token times the context it attends) make a long
prompt's tokens dearer than a short one's, and a chunked prefill's later chunks dearer than its
first; only sessions at two prompt lengths tell them from the tokens. With speculative
decoding each of the ``k`` drafting passes adds ``draft_pass_s + draft_seq_s x drafting
sequences``. A request reaches the scheduler ``request_s`` after it is sent (the API server),
plus ``frontend_stream_s`` for every other stream open (``c - 1`` in a closed loop of ``c``
users): the API server's one event loop serves a new request between rounds of every open
stream's chunks, so its wait grows with the streams in flight. vLLM's per-request timings show
it: on the real vLLM here the client's TTFT minus the server's (queue → first token) was 4, 6,
8, 11 and 21 ms at c = 1, 2, 4, 8, 16, its median close to its mean. Only a fit that has both
clocks (``--targets both``) can tell it from the engine's queue. A closed loop of alike
requests sends in waves (the users whose requests ended in one step send again together): the
replay starts a level's users in waves of ``c ** wave_exponent``, as the fitted sessions' users
bunched (``FittedCost.wave``), where it once started them all together. Both growths with
concurrency may slow: ``seq_s`` is paid ``running ** seq_exponent`` times a step and
``frontend_stream_s`` ``box_cox(c, stream_exponent)`` times a request (``c - 1`` at 1, ``ln c``
at 0). On the real vLLM here TPOT grew ~0.3 ms per sequence to c=4 and half that past it, and
the API server's wait slower still. Levels up to c=4 cannot show such a bend, so a fit reads
the exponents from levels that span 8x (``infmon.sim.growth.growth_shape``) or carries them from a
profile of a wider sweep. Otherwise it takes the **rate** form (``growth = "rate"``): both grow
with the tokens streamed per second, not with the sequences. A step of ``n`` sequences lasting
``t`` pays ``seq_s x n / t`` (so ``t = w + seq_s x n / t``, solved in ``features``), and a new
request waits ``frontend_stream_s`` per token/s the other streams take. The bend then follows
from how much the levels grew. On nine sweeps of the real vLLM here (c = 1-16, 3-5 Dec) TPOT
lay closer to a line in the tokens/s than to one in ``c`` in seven, and a fit of c = 1, 2, 4
in this form forecast TPOT at c=8 and 16 within 16% in eight, where the line overshot c=16 by
up to 32%; the ninth grew as a line in ``c`` and the form missed it by 27%, as it did a tenth
whose c = 1, 2, 4 rounds wandered by 2x (``bench/shape_transfer.py``). On the simulator's
sessions, where the host's work per sequence is 0.1% of a step, the two forms forecast alike.

Every cost is linear in the parameters once it is known which side of the ``max`` a step is on,
so ``features`` gives the step's time as a vector: the fit sums these into each observation and
solves a linear least-squares problem (``infmon.sim.fit``), and a forecast's variance is
``a' Cov a`` for the vector ``a`` of what it sums.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from infmon.sim.roofline import StepLoad

PARAMS = (
    "step_s",
    "seq_s",
    "weights_s",
    "kv_token_s",
    "compute_token_s",
    "attn_pair_s",
    "request_s",
    "frontend_stream_s",
    "draft_pass_s",
    "draft_seq_s",
)
"""The parameter vector's order."""
SPEC_PARAMS = ("draft_pass_s", "draft_seq_s")
API_SERVERS = ("concurrent", "serial")
"""The API server's two shapes a fit chooses between by their scatter (``FittedCost.api_server``)."""
GROWTHS = ("line", "rate")
"""How a fitted server's growth with concurrency is priced (``FittedCost.growth``)."""
NONE_UNLESS_FITTED = frozenset({"frontend_stream_s", "attn_pair_s"})
"""Costs whose absence means none, not an unknown: a fit without both clocks folds the API
server's wait per stream into ``request_s`` and the engine's costs, one prompt length folds
attention into ``compute_token_s`` (its pairs then grow with the tokens), and a profile written
before the cost existed did the same. Unfitted, such a cost is zero and a forecast need not flag
it."""
RATE_DESCRIBE = {
    "seq_s": "host work per step, per sequence/s streamed (the rate form: s per token/s)",
    "frontend_stream_s": "API server's event loop: a new request's wait per token/s the other"
    " streams take (the rate form)",
}
"""``DESCRIBE``'s two costs whose unit the rate form changes (``FittedCost.growth``)."""
DESCRIBE = {
    "step_s": "host work per engine step (scheduler, input preparation, sampler)",
    "seq_s": "host work per running sequence and step",
    "weights_s": "memory-bound pass: weights (and fixed kernel launches)",
    "kv_token_s": "memory-bound pass: per KV token of context read",
    "compute_token_s": "compute-bound pass: per query token (prefill, verification)",
    "attn_pair_s": "compute-bound pass: per query token and context token it attends (attention)",
    "request_s": "API server per request (template, tokeniser) before scheduling",
    "frontend_stream_s": "API server's event loop: a new request's wait per other stream open",
    "draft_pass_s": "speculative decoding: one drafting pass",
    "draft_seq_s": "speculative decoding: one drafting pass, per drafting sequence",
}
(
    I_STEP,
    I_SEQ,
    I_WEIGHTS,
    I_KV,
    I_COMPUTE,
    I_ATTN,
    I_REQUEST,
    I_FRONT_STREAM,
    I_DRAFT,
    I_DRAFT_SEQ,
) = range(len(PARAMS))


@dataclass(frozen=True, slots=True)
class FittedRange:
    """What the fit saw: a forecast outside it extrapolates and says so."""

    concurrency: tuple[int, int]
    prompt_tokens: tuple[float, float]
    output_tokens: tuple[float, float]
    batch_max: int  # the most sequences that ran in one step of the replayed levels
    spec_k: tuple[int, ...] = ()
    output_spread: float = 0.0
    """The fitted levels' output lengths: half their range over their mean (median of the
    levels; ``infmon bench``'s default ±10%: about 0.1). A what-if replays its lengths so."""


@dataclass(frozen=True, slots=True)
class FittedCost:
    """Fitted parameters (seconds), their covariance, and where they came from."""

    values: tuple[float, ...]
    cov: tuple[tuple[float, ...], ...]
    sources: tuple[str, ...]  # per parameter: the sessions it was fitted on ("" = not fitted)
    rms_rel: float  # the fit's root-mean-square relative residual (model error in a forecast)
    fitted_range: FittedRange
    acceptance: tuple[float, ...] = ()  # conditional acceptance per draft position (spec fit)
    speculative_k: int = 0
    kv_capacity_tokens: int = 0
    block_size: int = 16
    max_model_len: int = 0
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    notes: tuple[str, ...] = field(default_factory=tuple)
    targets: str = "client"
    """Whose TTFT and TPOT the costs were fitted to: ``client``, ``server`` (vLLM's own
    per-request timings) or ``client, server`` (sessions of both kinds)."""
    api_server: str = "concurrent"
    """How the API server's ``request_s`` of work per request is done: ``concurrent`` (a
    request's wait is its own) or ``serial`` (one event loop: requests sent together are taken
    one after another, so a closed loop's lockstep waves spread out). The fit tries both."""
    wave_exponent: float = 1.0
    """A closed loop of ``c`` users sends in waves of ``c ** wave_exponent`` requests (``wave``),
    as the fitted sessions' waves grew with ``c`` (``infmon.model.records.waves``): 1.0 sends
    every user together and keeps them in step, as a profile from before the waves did."""
    seq_exponent: float = 1.0
    """The host's work per step grows as ``running ** seq_exponent`` (``features``): 1.0 is a
    fixed cost per running sequence, as a profile from before the shapes assumed."""
    stream_exponent: float = 1.0
    """The API server's wait grows with the open streams as ``box_cox(c, stream_exponent)``
    (``open_streams``): 1.0 is ``c - 1``, one fixed wait per other stream; 0 is ``ln c``."""
    growth: str = "line"
    """How the host's work per sequence and the API server's wait grow: ``line`` (per running
    sequence and per open stream, bent by the two exponents) or ``rate`` (with the tokens
    streamed per second: ``seq_s`` is paid ``running / step`` times a step, the step's own
    length in seconds, and ``frontend_stream_s`` once per token/s the other streams take)."""
    shape_from: str = ""
    """Where the two exponents came from: the fitted levels' own curves, a profile carried
    over (``--shape-from``), or "" (none: assumed, the rate form or, in a profile from before
    it, the line)."""

    def __post_init__(self) -> None:
        if len(self.values) != len(PARAMS):
            raise ValueError(f"a fitted cost has {len(PARAMS)} values, not {len(self.values)}")

    @property
    def vector(self) -> np.ndarray:
        return np.asarray(self.values, dtype=float)

    @property
    def covariance(self) -> np.ndarray:
        return np.asarray(self.cov, dtype=float)

    def value(self, name: str) -> float:
        return self.values[PARAMS.index(name)]

    def wave(self, concurrency: int) -> int:
        """Requests a closed loop of ``concurrency`` users sends together (1 to all of them)."""
        return max(1, min(concurrency, round(concurrency**self.wave_exponent)))

    def open_streams(self, concurrency: int) -> float:
        """What ``frontend_stream_s`` is multiplied by in a closed loop of ``concurrency``."""
        return box_cox(concurrency, self.stream_exponent)

    def stderr(self, name: str) -> float:
        i = PARAMS.index(name)
        return float(np.sqrt(max(self.cov[i][i], 0.0)))

    def scaled(self, factors: dict[str, float]) -> FittedCost:
        """The same server with some costs scaled (a what-if: FP8 weights halve ``weights_s``);
        the covariance is scaled with them."""
        d = np.ones(len(PARAMS))
        for name, f in factors.items():
            d[PARAMS.index(name)] = f
        cov = self.covariance * np.outer(d, d)
        vals = tuple(float(v) for v in self.vector * d)
        return replace(self, values=vals, cov=tuple(tuple(float(x) for x in r) for r in cov))

    def with_values(self, updates: dict[str, float]) -> FittedCost:
        vals = list(self.values)
        for name, v in updates.items():
            vals[PARAMS.index(name)] = v
        return replace(self, values=tuple(vals))


def describe(name: str, growth: str = "line") -> str:
    """What a cost is, in the profile's form (``FittedCost.growth``)."""
    return RATE_DESCRIBE.get(name, DESCRIBE[name]) if growth == "rate" else DESCRIBE[name]


def box_cox(c: float, exponent: float) -> float:
    """``(c ** e - 1) / e``, ``ln c`` at ``e = 0``: zero at one, ``c - 1`` at ``e = 1``, and
    between them a growth that slows as ``c`` grows."""
    if exponent == 0:
        return math.log(c)
    return (c**exponent - 1.0) / exponent


def features(
    values: np.ndarray,
    step: StepLoad,
    k: int,
    by_kind: bool = False,
    seq_exponent: float = 1.0,
    rate: bool = False,
) -> np.ndarray:
    """The step's cost as a vector over ``PARAMS`` (its time is ``features @ values``); the
    side of the ``max`` is the one the current ``values`` put it on, or with ``by_kind`` the one
    a step's kind suggests (a prefill chunk computes, a decode reads memory): the fit's start,
    which cannot fall into the corner where one side is never taken and so never fitted. In
    the ``rate`` form ``seq_s``'s entry is ``n / t`` for the step's own length ``t`` (solved
    from the rest), so ``features @ values`` is still the step's time."""
    return np.array(_phi(values.tolist(), step, k, by_kind, seq_exponent, rate)[0])


def _phi(
    v: Sequence[float],
    step: StepLoad,
    k: int,
    by_kind: bool,
    seq_exponent: float,
    rate: bool,
) -> tuple[list[float], float]:
    """``features`` in plain floats, and the step's time (their product with ``v``): a fit
    prices every step of every replay so (400,000 steps for a sweep of 15 steps), where a
    ten-entry numpy array costs more than its sums."""
    phi = [0.0] * len(PARAMS)
    phi[I_STEP] = 1.0
    n = step.num_seqs
    target = step.target
    ctx, tokens, pairs = target.context_read, target.tokens, target.attn_pairs
    memory = v[I_WEIGHTS] + v[I_KV] * ctx
    compute = v[I_COMPUTE] * tokens + v[I_ATTN] * pairs
    if (not step.prefill_tokens) if by_kind else memory >= compute:
        phi[I_WEIGHTS] = 1.0
        phi[I_KV] = float(ctx)
        w = v[I_STEP] + memory
    else:
        phi[I_COMPUTE] = float(tokens)
        phi[I_ATTN] = float(pairs)
        w = v[I_STEP] + compute
    if step.spec_seqs and k:
        phi[I_DRAFT] = float(k)
        phi[I_DRAFT_SEQ] = float(k * step.spec_seqs)
        w += k * v[I_DRAFT] + k * step.spec_seqs * v[I_DRAFT_SEQ]
    h = v[I_SEQ]
    if rate and n:
        t = (w + math.sqrt(max(0.0, w * w + 4.0 * h * n))) / 2.0  # t = w + h x n / t
        phi[I_SEQ] = n / t if t > 0 else 0.0
    else:
        phi[I_SEQ] = float(n) ** seq_exponent
    return phi, w + phi[I_SEQ] * h


def step_time_s(cost: FittedCost, step: StepLoad, k: int) -> float:
    rate = cost.growth == "rate"
    return _phi(cost.values, step, k, False, cost.seq_exponent, rate)[1]
