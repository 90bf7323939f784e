"""Speculative decoding as it behaves: acceptance that varies per request and decays by position,
three proposers (a draft model, an EAGLE-style head, n-gram prompt lookup) and vLLM's checks.

A request draws one acceptance scale ``s = 2 x Beta(c/2, c/2)`` (mean 1; ``c`` is
``acceptance_concentration``): draft position ``i`` is accepted, given the earlier ones were,
with probability ``min(1, acceptance[i] x s)``. Expectations (the marginal per-position rates
vLLM's counters show, tokens per step) integrate over that distribution. The n-gram proposer,
when the engine knows the request's token ids, really looks up the context (prompt + output so
far): the longest suffix of ``prompt_lookup_min..max`` tokens seen before proposes the tokens
that followed it, and a position is accepted when it equals what the model emits.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

from infmon.sim.profiles import ModelProfile
from infmon.sim.roofline import EngineConfig

DECAY_PER_POSITION = 0.85  # one --acceptance value: later positions decay by this factor
_GRID = 256


class SpecConfigError(ValueError):
    """A speculative-decoding setup vLLM refuses (in vLLM's words)."""


def check_draft(
    method: str, target: ModelProfile, draft: ModelProfile | None, strict: bool = True
) -> None:
    """vLLM's strict draft check: a draft model must have the target's vocabulary size."""
    if not strict or method != "draft_model" or draft is None:
        return
    if draft.vocab_size != target.vocab_size:
        raise SpecConfigError(
            "Target and draft model should have the same vocabulary size. "
            f"Target model vocab_size={target.vocab_size}. "
            f"Draft model vocab_size={draft.vocab_size}. "
            "Using models with different tokenizers can cause out-of-bounds "
            "errors during speculative decoding."
        )


def expand_acceptance(values: tuple[float, ...], k: int) -> tuple[float, ...]:
    """Per-position conditional acceptance for k positions (one value decays by position)."""
    if not values:
        return (0.0,) * k
    if len(values) == 1:
        return tuple(values[0] * DECAY_PER_POSITION**i for i in range(k))
    return tuple(values[i] if i < len(values) else values[-1] for i in range(k))


@lru_cache(maxsize=64)
def _scale_grid(concentration: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Midpoint quadrature of s = 2 Beta(c/2, c/2): (scales, weights summing to 1)."""
    a = max(concentration / 2.0, 1e-3)
    xs = [(i + 0.5) / _GRID for i in range(_GRID)]
    dens = [math.exp((a - 1) * math.log(x) + (a - 1) * math.log(1 - x)) for x in xs]
    total = sum(dens)
    return tuple(2.0 * x for x in xs), tuple(d / total for d in dens)


def marginal_acceptance(
    acceptance: tuple[float, ...], k: int, concentration: float = 4.0
) -> list[float]:
    """Share of drafting steps whose position i is accepted (what vLLM's counters show).

    Steps, not requests, are counted: a request that accepts less needs more steps for the same
    output, so each scale is weighted by 1 / its expected tokens per step.
    """
    cond = expand_acceptance(acceptance, k)
    scales, weights = _scale_grid(concentration)
    out, norm = [0.0] * k, 0.0
    for s, w in zip(scales, weights, strict=True):
        marg, p = [], 1.0
        for a in cond:
            p *= min(1.0, a * s)
            marg.append(p)
        step_w = w / (1.0 + sum(marg))
        norm += step_w
        for i, m in enumerate(marg):
            out[i] += step_w * m
    return [m / norm for m in out]


def expected_tokens_per_step(cfg: EngineConfig) -> float:
    """Tokens per drafting step, averaged over steps (1 / E[1 / tokens-per-step] over requests)."""
    k = cfg.speculative_k
    return 1.0 + sum(marginal_acceptance(cfg.acceptance, k, cfg.acceptance_concentration))


def draw_scale(rng: random.Random, concentration: float) -> float:
    a = max(concentration / 2.0, 1e-3)
    return 2.0 * rng.betavariate(a, a)


def accept_drawn(rng: random.Random, cond: tuple[float, ...], scale: float) -> int:
    """Accepted draft positions for one step of one request."""
    n = 0
    for a in cond:
        if rng.random() >= min(1.0, a * scale):
            break
        n += 1
    return n


class NgramIndex:
    """Prompt lookup over a growing token sequence: n-gram -> where its latest earlier copy ended."""

    __slots__ = ("ids", "maps", "nmax", "nmin")

    def __init__(self, ids: list[int], nmin: int, nmax: int) -> None:
        self.nmin, self.nmax = nmin, nmax
        self.ids: list[int] = []
        self.maps: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in range(nmin, nmax + 1)}
        for t in ids:
            self.append(t)

    def append(self, token: int) -> None:
        ids = self.ids
        ids.append(token)
        end = len(ids) - 1  # the n-grams ending before the new token now have a continuation
        for n, table in self.maps.items():
            if end >= n:
                table[tuple(ids[end - n : end])] = end

    def propose(self, k: int) -> list[int]:
        ids = self.ids
        for n in range(self.nmax, self.nmin - 1, -1):
            if len(ids) <= n:
                continue
            pos = self.maps[n].get(tuple(ids[-n:]))
            if pos is not None:
                return ids[pos : pos + k]
        return []
