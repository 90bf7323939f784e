"""``compare`` over repeated trials: runs made with ``bench --repeat N`` (``trials.json`` in the
session) are compared by their trials, not by one step's bootstrap.

At a level both runs held at least twice (the steps ``trials.json`` names), every figure's
delta is the ratio of the trial means with the interval of ``model/compare/trial_deltas.py``;
the baseline's own row shows its trial means. Anywhere else (a run without trials, a level held
once, a step whose client was late) the within-run bootstrap stays, as before.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

from infmon.model.compare.baseline import BaselineView, LevelComparison, MetricDelta
from infmon.model.compare.noise import Delta
from infmon.model.compare.trial_deltas import MIN_TRIALS, trial_delta
from infmon.model.steps.book import CLOSED, RATE, Level
from infmon.report.doc import StepEntry
from infmon.report.runs import Run

TRIALS_FILE = "trials.json"
TRIALS_SCHEMA = "infmon.trials/1"
_FIGURES: dict[str, tuple[str, str | None, float]] = {
    "tok_s": ("output_throughput_tok_s", None, 1.0),
    "goodput": ("goodput_req_s", None, 1.0),
    **{
        f"{short}_p{q}": (f"{long}_ms", f"p{q}", 1e-3)
        for short, long in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2e", "e2el"))
        for q in (50, 90)
    },
}
"""A comparison's figure (``baseline.METRICS`` key) in a step entry: its key, part, scale."""


@dataclass(frozen=True)
class TrialLevel:
    """A level compared over trials: how many each side held."""

    level: Level
    base_n: int
    run_n: int


def _trials_path(source: str) -> Path | None:
    p = Path(source) if source else None
    if p is None:
        return None
    if p.is_dir():
        return p / TRIALS_FILE
    return p.with_name(TRIALS_FILE) if p.name == "report.json" else None


def _level(step: StepEntry) -> Level | None:
    if isinstance(c := step.get("concurrency"), int) and not isinstance(c, bool):
        return Level(CLOSED, float(c))
    if isinstance(r := step.get("rate"), (int, float)) and not isinstance(r, bool):
        return Level(RATE, float(r))
    return None


def _trial_steps(doc: object) -> set[int]:
    """The step indices ``trials.json`` counts as trials (empty: not a trials document)."""
    if not isinstance(doc, dict) or doc.get("schema") != TRIALS_SCHEMA:
        return set()
    out: set[int] = set()
    for lv in doc.get("levels") or []:
        steps = lv.get("steps") if isinstance(lv, dict) else None
        out |= {i for i in steps or [] if isinstance(i, int) and not isinstance(i, bool)}
    return out


def run_trials(run: Run) -> dict[Level, list[StepEntry]]:
    """The run's trials per level (only levels held at least ``MIN_TRIALS`` times); empty when
    the run has no readable ``trials.json``."""
    path = _trials_path(run.source)
    try:
        names = _trial_steps(json.loads(path.read_text())) if path and path.exists() else set()
    except (OSError, ValueError):
        return {}
    out: dict[Level, list[StepEntry]] = {}
    for step in run.doc.get("steps") or []:
        level = _level(step)
        if level is not None and step.get("step") in names and step.get("complete") is not False:
            out.setdefault(level, []).append(step)
    return {lv: s for lv, s in out.items() if len(s) >= MIN_TRIALS}


def figure(step: StepEntry, key: str) -> float:
    """One trial's figure in the comparison's unit (seconds for latencies); nan if missing."""
    name, part, scale = _FIGURES[key]
    v: object = step.get(name)
    if part is not None:
        v = v.get(part) if isinstance(v, dict) else None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    return float(v) * scale if ok else math.nan  # type: ignore[arg-type]


def _late(steps: list[StepEntry]) -> bool:
    return any(s.get("client_late") is True for s in steps)


def _over_trials(
    c: LevelComparison, base: list[StepEntry], cur: list[StepEntry]
) -> LevelComparison:
    metrics = []
    for m in c.metrics:
        d = trial_delta(
            [figure(s, m.metric.key) for s in base], [figure(s, m.metric.key) for s in cur]
        )
        metrics.append(m if d is None else MetricDelta(m.metric, d))
    return replace(c, metrics=tuple(metrics))


def with_trials(
    view: BaselineView, base: dict[Level, list[StepEntry]], cur: dict[Level, list[StepEntry]]
) -> tuple[BaselineView, tuple[TrialLevel, ...]]:
    """``view`` with its deltas over trials wherever both runs have them (see the module doc)."""
    levels, used = [], []
    for c in view.levels:
        a, b = base.get(c.level), cur.get(c.level)
        if a is None or b is None or _late(a) or _late(b):
            levels.append(c)
            continue
        levels.append(_over_trials(c, a, b))
        used.append(TrialLevel(c.level, len(a), len(b)))
    return replace(view, levels=tuple(levels)), tuple(used)


def base_cell(c: LevelComparison, steps: list[StepEntry]) -> LevelComparison:
    """The baseline's own row at a level it held over trials: each figure its trial mean."""
    metrics = []
    for m in c.metrics:
        xs = [x for s in steps if math.isfinite(x := figure(s, m.metric.key))]
        mean = sum(xs) / len(xs) if xs else math.nan
        metrics.append(MetricDelta(m.metric, Delta(math.nan, mean)))
    return replace(c, metrics=tuple(metrics))


def trials_text(used: tuple[TrialLevel, ...]) -> str:
    """``c=8, c=16 over 5 trials each`` (or ``c=8 over 3 and 5 trials``)."""
    groups: dict[tuple[int, int], list[str]] = {}
    for t in used:
        groups.setdefault((t.base_n, t.run_n), []).append(t.level.label)
    parts = []
    for (a, b), labels in groups.items():
        each = f"{a} trials each" if a == b else f"{a} (baseline) and {b} trials"
        parts.append(f"{', '.join(labels)} over {each}")
    return "; ".join(parts)
