"""How a level is shared among workers, and the arrival times the controller deals out.

Closed loop: ⌊C/N⌋ streams each plus one more for the first C mod N ranks. Poisson rate: λ/N
each with a seed per worker (a sum of independent Poisson processes is Poisson, so this split
is exact). Any other renewal process (gamma arrivals) does not split that way: the sum of N
gamma processes of rate λ/N is not a gamma process of rate λ. So for gamma arrivals with more
than one worker the controller draws the arrival times itself (``ArrivalDealer``) and deals
them round robin, a batch at a time, ahead of their send times; each worker sends at the times
it was given (on its own clock, shifted by the measured offset).
"""

from __future__ import annotations

import random

from infmon.model.steps.span import CLOSED

LOOKAHEAD_S = 1.0
"""Arrival times are dealt this far ahead of their send time (a batch every window)."""


def split_level(value: float, mode: str, workers: int) -> list[float]:
    """Each worker's share of a level (see the module docstring)."""
    if mode == CLOSED:
        c = int(value)
        return [float(c // workers + (1 if r < c % workers else 0)) for r in range(workers)]
    return [value / workers] * workers


class ArrivalDealer:
    """Gamma (or Poisson) arrivals at ``rate`` from ``start_s``, dealt to the live workers."""

    def __init__(self, rate: float, start_s: float, *, shape: float = 1.0, seed: int = 0) -> None:
        if not rate > 0 or not shape > 0:
            raise ValueError("rate and shape must be > 0")
        self.rate, self.shape = rate, shape
        self._rng = random.Random(seed)
        self._next_s = start_s + self._gap()
        self._turn = 0

    def _gap(self) -> float:
        if self.shape == 1.0:
            return self._rng.expovariate(self.rate)
        return self._rng.gammavariate(self.shape, 1.0 / (self.rate * self.shape))

    def deal(self, until_s: float, workers: list[int]) -> dict[int, list[float]]:
        """Every arrival before ``until_s`` not dealt yet, round robin over ``workers``."""
        out: dict[int, list[float]] = {w: [] for w in workers}
        if not workers:
            return out
        while self._next_s < until_s:
            out[workers[self._turn % len(workers)]].append(self._next_s)
            self._turn += 1
            self._next_s += self._gap()
        return out
