"""The figures of repeated steps, per level: every step held at one level is a trial, and each
figure (tokens/s, latencies, goodput, attainment; power where the GPU reports it) is summarised
over them with ``model/compare/trial_stats.py``. What bench prints after ``--repeat``, and
``trials.json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from infmon.model.compare.trial_stats import TrialStats, min_detectable_effect, summarize, tight
from infmon.model.records.stats import StepStats

FIGURES: tuple[tuple[str, Callable[[StepStats], float]], ...] = (
    ("output_tok_s", lambda s: s.output_throughput_tok_s),
    ("request_req_s", lambda s: s.request_throughput_req_s),
    ("goodput_req_s", lambda s: s.goodput_req_s),
    ("slo_attainment", lambda s: s.slo_attainment),
    ("ttft_p50_ms", lambda s: s.ttft.p50 * 1e3),
    ("ttft_p90_ms", lambda s: s.ttft.p90 * 1e3),
    ("tpot_p50_ms", lambda s: s.tpot.p50 * 1e3),
    ("tpot_p90_ms", lambda s: s.tpot.p90 * 1e3),
    ("e2el_p50_ms", lambda s: s.e2el.p50 * 1e3),
)
"""Each figure a trial contributes: its name (unit in the name) and how a step gives it."""
FIGURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FIGURES)
STOP_FIGURE = "output_tok_s"
"""The figure ``--until-ci`` waits on unless ``--until-ci-on`` names others."""
SLO_FIGURES = frozenset({"goodput_req_s", "slo_attainment"})
"""Figures a step has only under an SLO."""


@dataclass(frozen=True, slots=True)
class LevelTrials:
    """The trials of one level: each figure over the steps held at it."""

    label: str
    value: float
    steps: tuple[int, ...]
    figures: tuple[tuple[str, TrialStats], ...]

    def get(self, name: str) -> TrialStats:
        return next((s for n, s in self.figures if n == name), summarize(()))

    def to_dict(self) -> dict[str, object]:
        return {
            "level": self.label,
            "value": self.value,
            "steps": list(self.steps),
            "n": len(self.steps),
            "figures": {name: stats_dict(s) for name, s in self.figures},
        }


def _j(x: float, digits: int = 4) -> float | None:
    return round(x, digits) if math.isfinite(x) else None


def stats_dict(s: TrialStats) -> dict[str, float | int | None]:
    return {
        "n": s.n,
        "mean": _j(s.mean),
        "sd": _j(s.sd),
        "ci_low": _j(s.ci_low),
        "ci_high": _j(s.ci_high),
        "cv": _j(s.cv, 5),
        "mde": _j(min_detectable_effect(s.cv, s.n), 5),
    }


def _level(s: StepStats) -> tuple[str, float] | None:
    if s.concurrency is not None:
        return f"c={s.concurrency}", float(s.concurrency)
    if s.rate is not None:
        return f"{s.rate:g} req/s", float(s.rate)
    return None


def trials_by_level(
    steps: Sequence[tuple[int, StepStats]],
    extra: Mapping[int, Mapping[str, float]] | None = None,
) -> list[LevelTrials]:
    """Each level's trials, by level; ``extra`` adds figures per step index (e.g. power)."""
    groups: dict[tuple[str, float], list[tuple[int, StepStats]]] = {}
    for index, s in steps:
        key = _level(s)
        if key is not None:
            groups.setdefault(key, []).append((index, s))
    out = []
    for (label, value), members in sorted(groups.items(), key=lambda kv: kv[0][1]):
        figures = [(name, summarize([get(s) for _, s in members])) for name, get in FIGURES]
        names = sorted({k for i, _ in members for k in (extra or {}).get(i, {})})
        for name in names:
            vals = [(extra or {}).get(i, {}).get(name, math.nan) for i, _ in members]
            figures.append((name, summarize(vals)))
        out.append(LevelTrials(label, value, tuple(i for i, _ in members), tuple(figures)))
    return out


def loose(
    levels: Sequence[LevelTrials], target: float, figures: Sequence[str] = (STOP_FIGURE,)
) -> list[tuple[str, str, TrialStats]]:
    """Each level's figure (of ``figures``) whose interval is not yet within ``target`` of its
    mean (fewer than three trials, or wider): (level, figure, its trials)."""
    return [
        (lv.label, name, lv.get(name))
        for lv in levels
        for name in figures
        if not tight(lv.get(name), target)
    ]


def all_tight(
    levels: Sequence[LevelTrials], target: float, figures: Sequence[str] = (STOP_FIGURE,)
) -> bool:
    """Every level's interval of every one of ``figures`` is within ``target`` of its mean."""
    return bool(levels) and not loose(levels, target, figures)
