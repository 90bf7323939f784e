"""Runs side by side per load level: deltas, the noise test, the config diff, explanations.

The first run is the baseline. Every other run is compared with it by
``infmon.model.compare.baseline.compare_run`` (the computation the live monitor and ``bench
--baseline`` use), so the table's deltas, their intervals, their "beyond noise" marks and the
explanations read the same numbers. JSON (schema ``infmon.compare/2``) is made at the edge.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from infmon.model.compare import noise
from infmon.model.compare.baseline import (
    METRICS,
    BaselineView,
    LevelComparison,
    MetricDelta,
    RunFacts,
    compare_level,
    compare_run,
)
from infmon.model.compare.spec_econ import MODEL as SPEC_MODEL
from infmon.model.compare.trial_deltas import METHOD as TRIALS_METHOD
from infmon.model.steps.knee import Knee
from infmon.model.steps.kv_fill import knee_limit
from infmon.model.steps.span import Level
from infmon.model.steps.step_levels import LevelSample, by_level
from infmon.report import explain
from infmon.report.compare_trials import TrialLevel, base_cell, run_trials, trials_text, with_trials
from infmon.report.doc import KneeInfo, QualityInfo, ReportDoc
from infmon.report.runs import Run
from infmon.report.stepstats import knee_points

SCHEMA = "infmon.compare/2"
JsonObject = dict[str, object]
"""A part of ``compare.json`` as it is written (JSON-ready values; no code reads it back)."""


class KneeWithLimit(KneeInfo, total=False):
    """A run's knee and which limit it came from (``infmon.model.steps.kv_fill.knee_limit``)."""

    limit: str | None
    limit_text: str | None


@dataclass(frozen=True)
class ConfigRow:
    key: str
    values: tuple[object, ...]
    """Each run's value (None: unknown), as its report recorded it."""

    @property
    def differs(self) -> bool:
        known = [v for v in self.values if v is not None]
        return len({str(v) for v in known}) > 1


@dataclass(frozen=True)
class Comparison:
    """Everything ``infmon compare`` shows; ``views[i]`` is run ``i + 1`` against the first."""

    runs: tuple[Run, ...]
    views: tuple[BaselineView, ...]
    config: tuple[ConfigRow, ...]
    explanations: tuple[str, ...]
    warnings: tuple[str, ...]
    trials: tuple[tuple[TrialLevel, ...], ...] = ()
    """Per view, the levels whose deltas are over repeated trials (``compare_trials``)."""

    @property
    def base(self) -> Run:
        return self.runs[0]

    def levels(self) -> list[Level]:
        seen = {lv for r in self.runs for lv in by_level(r.levels)}
        return sorted(seen, key=lambda lv: (lv.mode, lv.value))

    def cell(self, run_index: int, level: Level) -> LevelComparison | None:
        """Run ``run_index``'s comparison at ``level`` (the baseline's own figures for 0)."""
        if run_index == 0:
            s = by_level(self.base.levels).get(level)
            if s is None:
                return None
            own = compare_level(None, s)
            over = [t for u in self.trials for t in u if t.level == level and t.used]
            keys = frozenset(k for t in over for k in t.keys)
            return base_cell(own, over[0].base_steps, keys) if over else own
        return self.views[run_index - 1].at(level)

    def to_dict(self) -> JsonObject:
        """``compare.json`` (schema ``infmon.compare/2``)."""
        return _document(self)

    def trials_note(self, run_index: int) -> str | None:
        """``c=16 over 3 trials each``: where run ``run_index``'s deltas are over trials."""
        seen = self.trials[run_index - 1] if 0 < run_index <= len(self.trials) else ()
        return trials_text(seen, self.runs[run_index].name) or None


def _opt(x: float) -> float | None:
    return x if math.isfinite(x) else None


def config_rows(runs: tuple[Run, ...]) -> tuple[ConfigRow, ...]:
    def row(key: str, fn: Callable[[RunFacts, ReportDoc], object]) -> ConfigRow:
        return ConfigRow(key, tuple(fn(r.facts, r.doc) for r in runs))

    def spec(f: RunFacts, _d: ReportDoc) -> str | None:
        return (
            None
            if f.spec_k is None
            else ("off" if f.spec_k == 0 else f"{f.spec_k} draft positions")
        )

    rows = [
        row("model", lambda f, d: f.model),
        row("dtype (by model id)", lambda f, d: f.weights),
        row("spec_decoding", spec),
        row("drafter", lambda f, d: f.drafter),
        row("max_model_len", lambda f, d: _int(f.max_model_len)),
        row("kv_num_gpu_blocks", lambda f, d: _int(f.kv_blocks)),
        row("kv_block_size_tokens", lambda f, d: _int(f.kv_block_size)),
        row("kv_capacity_tokens", lambda f, d: _int(f.kv_capacity_tokens)),
        row("kv_fill_concurrency", lambda f, d: _int(f.kv_fill)),
        row("cache_dtype", lambda f, d: f.cache_dtype),
        row("max_num_seqs (inferred)", lambda f, d: _int(f.max_num_seqs)),
        row("scenario", lambda f, d: (d.get("config") or {}).get("scenario")),
    ]
    extra = sorted({k for r in runs for k in _cache_config(r)})
    for k in extra:  # the labels of cache_config_info that differ (the rest is noise to read)
        cache_row = ConfigRow(f"cache_config.{k}", tuple(_cache_config(r).get(k) for r in runs))
        if cache_row.differs:
            rows.append(cache_row)
    return tuple(r for r in rows if any(v is not None for v in r.values))


def _cache_config(run: Run) -> dict[str, str]:
    return dict((run.doc.get("server") or {}).get("cache_config") or {})


def _int(x: float) -> int | None:
    return int(x) if math.isfinite(x) else None


def compare_runs(runs: list[Run]) -> Comparison:
    """The comparison of ``runs``; the first is the baseline."""
    ref = runs[0].reference()
    base_trials = run_trials(runs[0])
    views, used = [], []
    for r in runs[1:]:
        view, over = with_trials(compare_run(ref, r.levels, r.facts), base_trials, run_trials(r))
        views.append(view)
        used.append(over)
    lines: list[str] = []
    for run, view in zip(runs[1:], views, strict=True):
        lines += explain.explain(runs[0], run, view)
    return Comparison(
        tuple(runs), tuple(views), config_rows(tuple(runs)), tuple(lines),
        warm_cache_warnings(runs), tuple(used),
    )  # fmt: skip


def warm_cache_warnings(runs: list[Run]) -> tuple[str, ...]:
    """Two runs with the same seed against the same server and no restart between them (the
    same server start time): the later one was served its prompts from a warm prefix cache."""
    out = []
    for i, a in enumerate(runs):
        for b in runs[i + 1 :]:
            wa, wb = a.doc.get("workload") or {}, b.doc.get("workload") or {}
            ta, tb = a.doc.get("target") or {}, b.doc.get("target") or {}
            if wa.get("seed") is None or wa.get("seed") != wb.get("seed"):
                continue
            if ta.get("url") != tb.get("url"):
                continue
            sa, sb = wa.get("server_started_s"), wb.get("server_started_s")
            if sa is not None and sb is not None and sa != sb:
                continue  # restarted in between: a cold cache for both
            how = "no restart between them" if sa is not None else "a restart cannot be told"
            out.append(
                f"{a.name} and {b.name} sent the same prompts (seed {wa['seed']}) to "
                f"{ta.get('url')} ({how}): the later run met a warm prefix cache. "
                "Rerun without --seed (a fresh seed per run) or restart the server between runs."
            )
    return tuple(out)


# ---- JSON -----------------------------------------------------------------------------------


def delta_dict(d: MetricDelta) -> JsonObject:
    x = d.delta
    return {
        "value": _opt(x.value),
        "base": _opt(x.base),
        "delta_pct": _opt(100 * x.rel),
        "ci_pct": None if x.ci is None else [100 * x.ci[0], 100 * x.ci[1]],
        "beyond_noise": x.beyond_noise,
        "exact": x.exact,
    }


def _server_figures(s: LevelSample | None) -> JsonObject:
    ev = s.server if s is not None else None
    spec = s.spec if s is not None else None
    return {
        "kv_usage_max": _opt(ev.kv_usage_max) if ev is not None else None,
        "waiting_p50": _opt(ev.waiting_p50) if ev is not None else None,
        "running_p50": _opt(ev.running_p50) if ev is not None else None,
        "acceptance": spec.acceptance_rate if spec is not None else None,
        "mean_acceptance_length": spec.mean_length if spec is not None else None,
    }


def level_dict(c: LevelComparison, sample: LevelSample | None) -> JsonObject:
    d: JsonObject = {
        "in_baseline": c.in_baseline,
        "requests": c.requests,
        "base_requests": c.base_requests,
        **{m.metric.key: delta_dict(m) for m in c.metrics},
        "server": _server_figures(sample),
        "diagnosis": c.diagnosis,
    }
    if c.spec is not None:
        e = c.spec.economics
        d["spec"] = {
            "k": c.spec.k,
            "acceptance_rate": c.spec.acceptance_rate,
            "mean_acceptance_length": c.spec.mean_length,
            "alpha": _opt(c.spec.alpha),
            "tokens_per_chunk": _opt(c.spec.tokens_per_chunk),
            "itl_over_tpot": _opt(c.spec.itl_over_tpot),
            "speedup": _opt(e.speedup) if e else None,
            "breakeven_alpha": _opt(e.breakeven_alpha) if e else None,
            "step_ms": e.step_s * 1e3 if e else None,
            "base_step_ms": e.base_tpot_s * 1e3 if e else None,
            "verdict": e.verdict() if e else None,
        }
    return d


def knee_with_limit(run: Run) -> KneeWithLimit | None:
    """The run's knee with the limit it came from (KV cache, max_num_seqs…), or None."""
    k = run.doc.get("knee")
    if k is None:
        return None
    if not isinstance(k.get("concurrency"), int):  # a report.json's knee without its level
        return {**k}
    knee = Knee(
        k["concurrency"],
        str(k.get("reason", "")),
        bool(k.get("confirmed")),
        str(k.get("evidence", "")),
    )
    points = knee_points(run.doc.get("steps") or [])
    limit = knee_limit(knee, points, run.facts.kv_fill, run.facts.max_num_seqs)
    return {**k, "limit": limit.kind or None, "limit_text": limit.text or None}


def _document(cmp: Comparison) -> JsonObject:
    steps: list[JsonObject] = []
    for level in cmp.levels():
        runs: list[JsonObject] = []
        for i, run in enumerate(cmp.runs):
            c = cmp.cell(i, level)
            row: JsonObject = {"name": run.name, "present": c is not None}
            if c is not None:
                row.update(level_dict(c, by_level(run.levels).get(level)))
            runs.append(row)
        steps.append({"x": level.value, "mode": level.mode, "level": level.label, "runs": runs})
    return {
        "schema": SCHEMA,
        "baseline": cmp.base.name,
        "runs": [
            {
                "name": r.name,
                "source": r.source,
                "knee": knee_with_limit(r),
                "slo_max_concurrency": r.doc.get("slo_max_concurrency"),
                "quality": _quality_brief(r.doc.get("quality")),
                **_acceptance_brief(r),
            }
            for r in cmp.runs
        ],
        "noise_method": noise.METHOD,
        "trials_method": TRIALS_METHOD,
        "over_trials": [
            [
                {"level": t.level.label, "base_trials": t.base_n, "run_trials": t.run_n}
                for t in seen
                if t.used
            ]
            for seen in cmp.trials
        ],
        "trials_notes": [cmp.trials_note(i) for i in range(1, len(cmp.runs))],
        "spec_model": SPEC_MODEL,
        "metrics": [{"key": m.key, "label": m.label, "unit": m.unit} for m in METRICS],
        "config_diff": [
            {"key": r.key, "values": list(r.values), "differs": r.differs} for r in cmp.config
        ],
        "changes": [list(v.changes) for v in cmp.views],
        "limits": [{m.metric.key: delta_dict(m) for m in v.limits} for v in cmp.views],
        "steps": steps,
        "explanations": list(cmp.explanations),
        "warnings": list(cmp.warnings),
    }


def _acceptance_brief(run: Run) -> JsonObject:
    """Each request's own acceptance by task kind (servers that send it), and the fit."""
    section = run.doc.get("per_request")
    if section is None:
        return {}
    return {
        "acceptance_by_task": {g["name"]: g["rate"] for g in section["acceptance_by_task"]},
        "drafter_fit": section["drafter_fit"],
    }


def _quality_brief(q: QualityInfo | None) -> JsonObject | None:
    if not q:
        return None
    return {k: q.get(k) for k in ("probes", "correct", "accuracy", "agreement")}
