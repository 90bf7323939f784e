"""The comparison's charts and one-line findings: each run's tok/s, TTFT p90 and TPOT p50
against concurrency on one chart per figure (the baseline and each change overlaid), and the
speculative-decoding acceptance per draft position. Pure SVG (``infmon.report.svg``): the page
stays self-contained with no scripts."""

from __future__ import annotations

import math

from infmon.model.compare.baseline import BY_KEY, value_text
from infmon.model.steps.span import CLOSED, Level
from infmon.report import svg
from infmon.report.compare import Comparison

OVERLAID = (
    ("tok_s", "Output tokens/s against concurrency", "output tok/s", 1.0),
    ("ttft_p90", "TTFT p90 against concurrency", "TTFT p90 (ms)", 1e3),
    ("tpot_p50", "TPOT p50 against concurrency", "TPOT p50 (ms)", 1e3),
)
"""(metric key, chart title, y-axis label, scale from the metric's unit to the axis')."""


def _closed_levels(cmp: Comparison) -> list[Level]:
    return [lv for lv in cmp.levels() if lv.mode == CLOSED]


def _value(cmp: Comparison, run: int, level: Level, key: str) -> float | None:
    c = cmp.cell(run, level)
    d = c.get(key) if c is not None else None
    v = d.delta.value if d is not None else math.nan
    return v if math.isfinite(v) else None


def overlay_charts(cmp: Comparison) -> list[str]:
    """One SVG per figure, a line per run against concurrency (log₂ axis from c=1)."""
    levels = _closed_levels(cmp)
    if not levels:
        return []
    xs = tuple(lv.value for lv in levels)
    out = []
    for key, title, y_label, scale in OVERLAID:
        series = []
        for i, run in enumerate(cmp.runs):
            ys = tuple(
                None if (v := _value(cmp, i, lv, key)) is None else v * scale for lv in levels
            )
            if any(y is not None for y in ys):
                series.append(svg.Series(run.name, xs, ys, points=True))
        if series:
            chart = svg.Chart(title, "concurrency", y_label, tuple(series), log2_x=True, x_from=1.0)
            out.append(svg.render(chart))
    return out


def acceptance_chart(cmp: Comparison) -> str | None:
    """Each spec run's acceptance per draft position (vLLM's accepted at position i / drafts),
    one line per run and level: where the drafter stops being accepted."""
    series = []
    for run in cmp.runs:
        for s in run.levels:
            if s.level.mode != CLOSED or s.spec is None or not s.spec.per_position:
                continue
            pos = tuple(float(i + 1) for i in range(len(s.spec.per_position)))
            series.append(svg.Series(f"{run.name} {s.label}", pos, s.spec.per_position, True))
    if not series:
        return None
    chart = svg.Chart(
        "Acceptance per draft position", "draft position", "acceptance rate", tuple(series[:6])
    )
    return svg.render(chart)


def findings(cmp: Comparison) -> list[str]:
    """One line per change: its single-stream (or lowest-level) tok/s, TTFT p90 and TPOT p50
    against the baseline's, each with its noise mark."""
    levels = _closed_levels(cmp)
    if not levels:
        return []
    lv = levels[0]
    out = []
    for i, run in enumerate(cmp.runs[1:], start=1):
        c = cmp.cell(i, lv)
        if c is None or not c.in_baseline:
            continue
        cells = []
        for key in ("tok_s", "ttft_p90", "tpot_p50"):
            d = c.get(key)
            if d is None or not math.isfinite(d.delta.rel):
                continue
            mark = {True: " *", False: " ≈", None: " ?"}[d.delta.beyond_noise]
            base, now = (
                value_text(BY_KEY[key], d.delta.base),
                value_text(BY_KEY[key], d.delta.value),
            )
            cells.append(f"{BY_KEY[key].label} {now} vs {base} ({100 * d.delta.rel:+.0f}%{mark})")
        if cells:
            out.append(f"{run.name} at {lv.label}: " + "; ".join(cells))
    return out
