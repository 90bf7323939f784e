"""The automatic concurrency sweep (1, 2, 4, … each held a while), stopping past the knee or at
an SLO breach. The knee and the SLO limit are the bench's own rules (``infmon.model.knee``, via
``live_steps.knee_of`` / ``slo_limit_of``), so the sweep stops where the report puts the knee.

Pure: ``Sweep.next_level(now, points)`` says what to do; the UI applies it to the load driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.dashboard import StepPoint
from infmon.model.live_steps import knee_of, slo_limit_of


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
            self.stop_reason = f"SLO breached at c={self.level}"
            self.hold_level = slo_limit_of(mine)
            return None
        knee = knee_of(mine)
        if knee is not None and self.level > knee["concurrency"]:
            self.stop_reason = f"past the knee (c={knee['concurrency']})"
            self.hold_level = knee["concurrency"]
            return None
        if self.level * 2 > self.max_level:
            self.stop_reason = f"reached c={self.level}"
            return None
        self.level *= 2
        self.level_since_s = now
        return self.level

    def stop(self, reason: str) -> None:
        self.stop_reason = reason
