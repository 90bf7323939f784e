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
from infmon.model.steps.span import CLOSED, RATE, Level
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
    keys: frozenset[str] = frozenset()
    """The figures compared over trials (a figure a trial lacks keeps the bootstrap); empty:
    the level is not compared over trials (``late`` says why, when it is the late client)."""
    late: tuple[int, int] = (0, 0)
    """Trials left out on each side (baseline, run): the client's timestamps were late."""
    base_steps: tuple[StepEntry, ...] = ()
    """The baseline's trials kept (its row shows their means)."""

    @property
    def used(self) -> bool:
        return bool(self.keys)

    def late_text(self, run: str) -> str:
        """``the client was late in 2 of the baseline's 3 trials`` (empty: none late)."""
        parts = [
            f"{n} of {who} {n + kept} trials"
            for n, kept, who in (
                (self.late[0], self.base_n, "the baseline's"),
                (self.late[1], self.run_n, f"{run}'s"),
            )
            if n
        ]
        return f"the client was late in {' and '.join(parts)}" if parts else ""


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


def _over_trials(
    c: LevelComparison, base: list[StepEntry], cur: list[StepEntry]
) -> tuple[LevelComparison, frozenset[str]]:
    metrics, keys = [], set()
    for m in c.metrics:
        d = trial_delta(
            [figure(s, m.metric.key) for s in base], [figure(s, m.metric.key) for s in cur]
        )
        metrics.append(m if d is None else MetricDelta(m.metric, d))
        if d is not None:
            keys.add(m.metric.key)
    return replace(c, metrics=tuple(metrics)), frozenset(keys)


def _kept(steps: list[StepEntry]) -> list[StepEntry]:
    return [s for s in steps if s.get("client_late") is not True]


def with_trials(
    view: BaselineView, base: dict[Level, list[StepEntry]], cur: dict[Level, list[StepEntry]]
) -> tuple[BaselineView, tuple[TrialLevel, ...]]:
    """``view`` with its deltas over trials wherever both runs have them (see the module doc);
    a trial whose client was late is left out (its timestamps are not the server's), and a
    level left with fewer than two trials a side keeps the bootstrap, with that reason."""
    levels, seen = [], []
    for c in view.levels:
        a, b = base.get(c.level), cur.get(c.level)
        if a is None or b is None:
            levels.append(c)
            continue
        ka, kb = _kept(a), _kept(b)
        late = (len(a) - len(ka), len(b) - len(kb))
        keys: frozenset[str] = frozenset()
        if min(len(ka), len(kb)) >= MIN_TRIALS:
            c, keys = _over_trials(c, ka, kb)
        levels.append(c)
        if keys or any(late):
            seen.append(TrialLevel(c.level, len(ka), len(kb), keys, late, tuple(ka)))
    return replace(view, levels=tuple(levels)), tuple(seen)


def base_cell(
    c: LevelComparison, steps: tuple[StepEntry, ...], keys: frozenset[str]
) -> LevelComparison:
    """The baseline's own row at a level compared over trials: each figure in ``keys`` its
    trial mean (the others as the bootstrap's deltas read them)."""
    metrics = []
    for m in c.metrics:
        if m.metric.key not in keys:
            metrics.append(m)
            continue
        xs = [x for s in steps if math.isfinite(x := figure(s, m.metric.key))]
        mean = sum(xs) / len(xs) if xs else math.nan
        metrics.append(MetricDelta(m.metric, Delta(math.nan, mean)))
    return replace(c, metrics=tuple(metrics))


def trials_text(seen: tuple[TrialLevel, ...], run: str) -> str:
    """``c=8, c=16 over 5 trials each`` (or ``c=8 over 3 (baseline) and 5 trials``), and why a
    level with trials is not compared over them (``c=16 not over trials: the client was late
    in 2 of the baseline's 3 trials``)."""
    groups: dict[tuple[int, int], list[str]] = {}
    for t in seen:
        if t.used:
            groups.setdefault((t.base_n, t.run_n), []).append(t.level.label)
    parts = []
    for (a, b), labels in groups.items():
        each = f"{a} trials each" if a == b else f"{a} (baseline) and {b} trials"
        parts.append(f"{', '.join(labels)} over {each}")
    for t in seen:
        if t.late_text(run):
            left = "left out" if t.used else "not over trials"
            parts.append(f"{t.level.label} {left}: {t.late_text(run)}")
    return "; ".join(parts)
