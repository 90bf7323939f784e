"""A report's repeated trials: when a level was held more than once (``--repeat``, a sweep
that came back to it), each figure's mean, 95 % interval (t) and CV over those steps, and the
smallest change of output tok/s the trials can show (``model/compare/trial_stats.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from infmon.model.compare.trial_stats import TrialStats, min_detectable_effect, summarize
from infmon.report.diagnosis import step_label
from infmon.report.doc import ReportDoc, StepEntry

HEADER = (
    "c / rate",
    "trials",
    "output tok/s",
    "TTFT p90 ms",
    "TPOT p90 ms",
    "smallest change seen",
)
Table = Callable[[tuple[str, ...], list[list[str]]], list[str]]


def _value(step: StepEntry, key: str, part: str | None = None) -> float:
    v: object = step.get(key)
    if part is not None:
        v = v.get(part) if isinstance(v, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _cell(s: TrialStats, digits: int = 1) -> str:
    if s.n < 2 or math.isnan(s.ci_low):
        return "—"
    return f"{s.mean:,.{digits}f} ({s.ci_low:,.{digits}f}–{s.ci_high:,.{digits}f}) cv {s.cv:.1%}"


def rows(doc: ReportDoc) -> list[list[str]]:
    """One row per level held at least twice."""
    groups: dict[str, list[StepEntry]] = {}
    for step in doc.get("steps") or []:
        if step.get("complete") is False:  # a step the session never ended (a killed run)
            continue
        groups.setdefault(step_label(step), []).append(step)
    out = []
    for label, steps in groups.items():
        if len(steps) < 2:
            continue
        tok = summarize([_value(s, "output_throughput_tok_s") for s in steps])
        ttft = summarize([_value(s, "ttft_ms", "p90") for s in steps])
        tpot = summarize([_value(s, "tpot_ms", "p90") for s in steps])
        mde = min_detectable_effect(tok.cv, tok.n)
        seen = "—" if math.isnan(mde) else f"±{mde:.1%}"
        out.append([label, str(len(steps)), _cell(tok), _cell(ttft), _cell(tpot, 2), seen])
    return out


def markdown_lines(doc: ReportDoc, table: Table) -> list[str]:
    found = rows(doc)
    if not found:
        return []
    return [
        "## Repeated trials",
        "",
        "Mean (95% interval, t) and CV over the steps held at each level; the last column is the "
        "smallest change of output tok/s as many trials a side would show (95%, power 80%).",
        "",
        *table(HEADER, found),
        "",
    ]
