"""The automatic concurrency sweep (1, 2, 4, … each held a while) and the knee rules it stops on.

Pure: ``Sweep.next_level(now, points)`` says what to do; the UI applies it to the load driver.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.dashboard import StepPoint

KNEE_GAIN_FRACTION = 0.10
"""Past the knee a doubling of concurrency gains less than this share of throughput."""


def knee_level(points: Sequence[StepPoint]) -> float | None:
    """The last level whose doubling still paid: the first step after which throughput
    grows by less than ``KNEE_GAIN_FRACTION`` per doubling of load."""
    pts = sorted((p for p in points if not math.isnan(p.output_tokens_per_s)), key=lambda p: p.level)
    for prev, nxt in itertools.pairwise(pts):
        if prev.output_tokens_per_s <= 0 or nxt.level <= prev.level:
            continue
        doublings = math.log2(nxt.level / prev.level)
        gain = (nxt.output_tokens_per_s / prev.output_tokens_per_s) ** (1 / doublings) - 1
        if gain < KNEE_GAIN_FRACTION:
            return prev.level
    return None


def slo_limit_level(points: Sequence[StepPoint]) -> float | None:
    """The highest level whose step met the SLO, below the first level that broke it."""
    best = None
    for p in sorted(points, key=lambda p: p.level):
        if p.meets_slo is None:
            continue
        if not p.meets_slo:
            break
        best = p.level
    return best


@dataclass(slots=True)
class Sweep:
    """1, 2, 4, … up to ``max_level``, each held ``step_s``; stops past the knee or at an SLO breach."""

    step_s: float
    max_level: int = 1024
    started_s: float | None = None
    level: int = 0
    level_since_s: float = 0.0
    stop_reason: str | None = None
    hold_level: int | None = None
    """Where to leave the load once the sweep is over: the knee, or the last level within SLO."""

    def start(self, now: float) -> int:
        self.started_s, self.level, self.level_since_s, self.stop_reason = now, 1, now, None
        self.hold_level = None
        return self.level

    @property
    def active(self) -> bool:
        return self.started_s is not None and self.stop_reason is None

    def next_level(self, now: float, points: Sequence[StepPoint]) -> int | None:
        """The new level when the current step has been held long enough; None to hold.
        Sets ``stop_reason`` (and returns None) when the sweep is over."""
        if not self.active or now - self.level_since_s < self.step_s:
            return None
        mine = [p for p in points if p.mode == "closed" and p.held_s > 0]
        current = [p for p in mine if p.level == self.level]
        if current and current[-1].meets_slo is False:
            limit = slo_limit_level(mine)
            self.stop_reason = f"SLO breached at c={self.level}"
            self.hold_level = int(limit) if limit is not None else None
            return None
        knee = knee_level([p for p in mine if p.settled])
        if knee is not None and self.level > knee:
            self.stop_reason = f"past the knee (c={knee:g})"
            self.hold_level = int(knee)
            return None
        if self.level * 2 > self.max_level:
            self.stop_reason = f"reached c={self.level}"
            return None
        self.level *= 2
        self.level_since_s = now
        return self.level

    def stop(self, reason: str) -> None:
        self.stop_reason = reason
