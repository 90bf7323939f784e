"""The SLO verdict of a concurrency sweep, said the same way by bench, reports, compare and
the monitor: "c=32", "≥ 64, not reached" (every level tried met it: the limit lies above the
highest one) or "none met" (already the lowest level missed it).

``slo_max_concurrency`` (``infmon.model.steps.knee``) gives the highest level that, with every level
below it, met the SLO; that number alone reads as a limit even when it is only the highest
level tried, and says nothing when no level met it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from infmon.model.steps.knee import SLO_ATTAINMENT
from infmon.model.steps.result import StepResult

SloStep = StepResult | Mapping[str, object]
"""A step the verdict reads: the ledger's result, or a ``steps[]`` entry of a report or of
``infmon bench --json`` (its ``concurrency`` and ``slo_attainment``)."""


class SloVerdictDict(TypedDict):
    slo_set: bool
    limit: int | None
    highest_tried: int | None
    reached: bool
    text: str


@dataclass(frozen=True, slots=True)
class SloVerdict:
    """What a sweep says about its SLO."""

    slo_set: bool
    limit: int | None
    """The highest concurrency that (with every lower level) met the SLO."""
    highest_tried: int | None
    """The highest concurrency with a measured step."""
    lowest_tried: int | None = None

    @property
    def reached(self) -> bool:
        """A level past the limit missed the SLO (the limit is the real one)."""
        return (
            self.limit is not None
            and self.highest_tried is not None
            and (self.highest_tried > self.limit)
        )

    def text(self) -> str:
        """``c=32``, ``≥ 64, not reached``, ``none met`` or ``no SLO set``."""
        if not self.slo_set:
            return "no SLO set"
        if self.highest_tried is None:
            return "not judged (no request measured)"
        if self.limit is None:
            return "none met"
        if not self.reached:
            return f"≥ {self.limit:,}, not reached"
        return f"c={self.limit:,}"

    def sentence(self) -> str:
        """The report's and bench's line: ``Highest concurrency meeting the SLO: …``."""
        if not self.slo_set:
            return "No SLO set (--slo ttft=500ms,tpot=50ms gives goodput and the SLO limit)."
        if self.highest_tried is None:
            return "SLO: not judged (no measured request)."
        if self.limit is None:
            first = f"c={self.lowest_tried:,}" if self.lowest_tried is not None else "the lowest"
            return f"SLO: none met ({first} already missed it)."
        if not self.reached:
            return (
                f"Highest concurrency meeting the SLO: ≥ {self.limit:,}, not reached "
                f"(every level tried met it; the limit lies above c={self.highest_tried:,})."
            )
        return f"Highest concurrency meeting the SLO: {self.limit:,}."

    def to_dict(self) -> SloVerdictDict:
        return {
            "slo_set": self.slo_set,
            "limit": self.limit,
            "highest_tried": self.highest_tried,
            "reached": self.reached,
            "text": self.text(),
        }


def _attainments(steps: Sequence[SloStep]) -> list[tuple[float, float]]:
    """(concurrency, SLO attainment) of the first measured step at each level, by level: a
    step too short to judge the knee still tells whether its requests met the SLO."""
    first: dict[float, float] = {}
    for step in steps:
        c: object
        a: object
        if isinstance(step, StepResult):
            c, a = step.stats.concurrency, step.stats.slo_attainment
        else:
            c, a = step.get("concurrency"), step.get("slo_attainment")
        if isinstance(c, (int, float)) and isinstance(a, (int, float)) and math.isfinite(a):
            first.setdefault(float(c), float(a))
    return sorted(first.items())


def slo_verdict(steps: Sequence[SloStep], slo_set: bool) -> SloVerdict:
    """The verdict over closed-loop steps (``StepResult``s, or ``steps[]`` entries)."""
    points = _attainments(steps)
    limit: int | None = None
    for c, attainment in points:
        if attainment < SLO_ATTAINMENT:
            break
        limit = int(c)
    highest = int(points[-1][0]) if points else None
    lowest = int(points[0][0]) if points else None
    return SloVerdict(slo_set, limit if slo_set else None, highest, lowest)
