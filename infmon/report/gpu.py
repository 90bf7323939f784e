"""The GPU side of a report: each step's GPU figures (``steps[].gpu``), the session's GPUs and
their timeline (``doc["gpu"]``), the GPU diagnosis per step, and the Markdown and HTML sections
(a per-step table, charts of activity, DRAM, power and memory over time with the steps marked).

Built from the journal's scrapes by ``infmon.model.server.gpu_steps`` (the live pane's rows), so a
report says what the screen said, step by step. A session without GPU data has no section.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import cast

from infmon.model.server.efficiency import step_efficiency
from infmon.model.server.gpu_steps import GpuTimeline, StepGpuInfo, step_lines
from infmon.report import svg
from infmon.report.diagnosis import as_number, step_label
from infmon.report.doc import (
    GpuInfo,
    GpuPart,
    GpuPoint,
    ReportDoc,
    StepEfficiencyInfo,
    StepEntry,
)
from infmon.report.fmt import DASH, concurrency_axis, num, pct

MAX_POINTS = 600
"""Timeline points kept per GPU."""
CHART_GPUS = 3
"""GPUs charted (serving first); the table has them all."""
HEADER = (
    "c / rate",
    "GPU",
    "activity mean / max",
    "DRAM mean",
    "power mean / limit W",
    "memory max / total GiB",
    "SM clock min / peak MHz",
    "throttle",
    "other holders (mem, SM mean)",
)
MarkdownTable = Callable[[tuple[str, ...], list[list[str]]], list[str]]
"""The Markdown writer's table function (header, rows → lines)."""
HtmlTable = Callable[[list[str], list[list[str]]], str]
"""The HTML writer's table function (header, rows → one element)."""


def attach(steps: list[StepEntry], timeline: GpuTimeline) -> tuple[list[str], GpuPart]:
    """Each step's GPU figures into ``steps[].gpu``; returns the steps' GPU diagnosis lines and
    the document's GPU section (both empty when the session has no GPU data)."""
    if not timeline:
        return [], {}
    lines: list[str] = []
    low: float | None = None
    for step in steps:
        start, end = as_number(step.get("start_s")), as_number(step.get("end_s"))
        if start is None or end is None:
            continue
        gpus = timeline.step(start, end)
        step["gpu"] = [g.to_dict() for g in gpus]
        tok_s = as_number(step.get("output_throughput_tok_s"))
        eff = step_efficiency([(g.row.power_w, g.row.serving) for g in gpus], tok_s or math.nan)
        if eff is not None:
            step["efficiency"] = cast(StepEfficiencyInfo, eff.to_dict())
        ttft = as_number((step.get("ttft_ms") or {}).get("p90"))
        waiting = as_number((step.get("server") or {}).get("waiting_max"))
        found = step_lines(
            gpus, waiting_max=waiting, ttft_p90_ms=ttft, lowest_earlier_ttft_p90_ms=low
        )
        lines += [f"{step_label(step)}: {line}" for line in found]
        if ttft is not None:
            low = ttft if low is None else min(low, ttft)
    return _summary(lines), {"gpu": {"gpus": _gpus(timeline), "timeline": _points(timeline)}}


def _summary(lines: list[str]) -> list[str]:
    """The same finding on many consecutive steps is said on each (it is per step), up to 20."""
    return lines[:20] + ([f"… {len(lines) - 20} more GPU findings"] if len(lines) > 20 else [])


def _gpus(timeline: GpuTimeline) -> list[GpuInfo]:
    out: list[GpuInfo] = []
    for r in timeline.last_rows():
        out.append(
            {
                "key": r.key,
                "label": r.label,
                "name": r.name,
                "serving": r.serving,
                "mem_total_gib": None if math.isnan(r.mem_total_gib) else r.mem_total_gib,
                "power_limit_w": None if math.isnan(r.power_limit_w) else r.power_limit_w,
            }
        )
    return out


def _v(x: float, digits: int = 4) -> float | None:
    return None if math.isnan(x) else round(x, digits)


def _points(timeline: GpuTimeline) -> list[GpuPoint]:
    """Per GPU, every n-th scrape so that at most ``MAX_POINTS`` remain per GPU."""
    out: list[GpuPoint] = []
    for key in timeline.gpu_keys():
        pts = timeline.points(key)
        for t, v in pts[:: max(1, math.ceil(len(pts) / MAX_POINTS))]:
            out.append(
                {
                    "t_s": round(t, 3),
                    "key": key,
                    "activity": _v(v["activity"]),
                    "dram": _v(v["dram"]),
                    "power_w": _v(v["power_w"], 1),
                    "mem_used_gib": _v(v["mem_used_gib"], 3),
                    "sm_clock_mhz": _v(v["sm_clock_mhz"], 0),
                }
            )
    return sorted(out, key=lambda p: (p["t_s"], p["key"]))


def _others(g: StepGpuInfo) -> str:
    parts = []
    for h in g.get("others") or []:
        mem = h.get("mem_gib_max")
        sm = h.get("sm_percent_mean")
        parts.append(
            f"{h.get('name')} ({num(mem)} GiB, SM {num(sm, 0)}%)"
            if sm is not None
            else f"{h.get('name')} ({num(mem)} GiB)"
        )
    return "; ".join(parts) or DASH


def rows(doc: ReportDoc) -> list[list[str]]:
    """The per-step GPU table: one row per step and GPU."""
    out = []
    for step in doc.get("steps") or []:
        for g in step.get("gpu") or []:
            out.append(
                [
                    step_label(step),
                    str(g.get("label")) + ("" if g.get("serving") else " (not serving)"),
                    f"{pct(g.get('activity_mean'))} / {pct(g.get('activity_max'))}",
                    pct(g.get("dram_mean")),
                    f"{num(g.get('power_w_mean'), 0)} / {num(g.get('power_limit_w'), 0)}",
                    f"{num(g.get('mem_used_gib_max'))} / {num(g.get('mem_total_gib'))}",
                    f"{num(g.get('sm_clock_mhz_min'), 0)} / {num(g.get('sm_clock_peak_mhz'), 0)}",
                    ", ".join(map(str, g.get("throttle") or [])) or DASH,
                    _others(g),
                ]
            )
    return out


EFFICIENCY_HEADER = ("c / rate", "output tok/s", "GPU power W", "tok/s per W", "J per token")


def efficiency_rows(doc: ReportDoc) -> list[list[str]]:
    """Per step with GPU power: output tokens/s per watt and joules per output token."""
    out = []
    for step in doc.get("steps") or []:
        e = step.get("efficiency")
        if e is not None:
            tok = step.get("output_throughput_tok_s")
            out.append(
                [
                    step_label(step),
                    num(tok, 1),
                    num(e["power_w"], 0),
                    num(e["tok_s_per_w"], 3),
                    num(e["j_per_token"], 3),
                ]
            )
    return out


def energy_line(doc: ReportDoc) -> str | None:
    """What a run prints at its end where GPU power was known: ``energy per step (serving
    GPUs): c=1 0.831 tok/s per W, 1.204 J/token · c=16 …`` (None: no step has it)."""
    parts = []
    for step in doc.get("steps") or []:
        e = step.get("efficiency")
        if e is not None:
            per_w, joules = num(e["tok_s_per_w"], 3), num(e["j_per_token"], 3)
            parts.append(f"{step_label(step)} {per_w} tok/s per W, {joules} J/token")
    return "energy per step (serving GPUs): " + " · ".join(parts) if parts else None


def markdown_lines(doc: ReportDoc, table: MarkdownTable) -> list[str]:
    """``## GPU`` with the per-step table (``table`` is the writer's table function)."""
    if not doc.get("gpu"):
        return []
    eff = efficiency_rows(doc)
    more = (
        ["Energy per step (serving GPUs):", "", *table(EFFICIENCY_HEADER, eff), ""] if eff else []
    )
    return ["## GPU", "", *table(HEADER, rows(doc)), "", *more]


def _series(doc: ReportDoc) -> list[tuple[str, list[GpuPoint]]]:
    section = doc.get("gpu")
    if section is None:
        return []
    gpus = [g for g in section["gpus"] if g["serving"]] or section["gpus"]
    pts = section["timeline"]
    return [
        (str(g.get("label")), [p for p in pts if p.get("key") == g.get("key")])
        for g in gpus[:CHART_GPUS]
    ]


def _figures_of(step: StepEntry, label: str) -> StepGpuInfo | None:
    return next((g for g in step.get("gpu") or [] if g["label"] == label), None)


def _step_marks(doc: ReportDoc) -> tuple[tuple[float, str], ...]:
    marks = []
    for step in doc.get("steps") or []:
        if (start := as_number(step.get("start_s"))) is not None:
            marks.append((start, step_label(step)))
    return tuple(marks[-40:])


def _per_step(doc: ReportDoc) -> str | None:
    """The serving GPUs' mean activity, DRAM and power at each step's concurrency."""
    steps = [s for s in doc.get("steps") or [] if s.get("gpu")]
    xs = concurrency_axis(steps)
    if not steps or xs is None:
        return None
    series = []
    for label, _ in _series(doc):
        figs: list[Mapping[str, object]] = [_figures_of(s, label) or {} for s in steps]
        activity, dram = (
            svg.column(figs, "activity_mean", 100.0),
            svg.column(figs, "dram_mean", 100.0),
        )
        series += [
            svg.Series(f"{label} activity %", xs, activity, points=True),
            svg.Series(f"{label} DRAM %", xs, dram, points=True),
            svg.Series(
                f"{label} power W",
                xs,
                svg.column(figs, "power_w_mean"),
                points=True,
                right_axis=True,
            ),
        ]
    chart = svg.Chart(
        "GPU per step",
        "concurrency (log2)",
        "busy (%)",
        tuple(series),
        log2_x=True,
        y2_label="power (W)",
    )
    return svg.render(chart)


def charts(doc: ReportDoc) -> list[str]:
    """Per step (at each concurrency) and over time with the steps marked: activity and DRAM
    (%), power (W) and memory (GiB) of the serving GPUs."""
    per = _series(doc)
    if not per:
        return []
    marks = _step_marks(doc)
    busy, power = [], []
    for label, pts in per:
        t = tuple(p["t_s"] for p in pts)
        busy += [
            svg.Series(f"{label} activity %", t, svg.column(pts, "activity", 100.0)),
            svg.Series(f"{label} DRAM %", t, svg.column(pts, "dram", 100.0)),
        ]
        power += [
            svg.Series(f"{label} power W", t, svg.column(pts, "power_w")),
            svg.Series(f"{label} memory GiB", t, svg.column(pts, "mem_used_gib"), right_axis=True),
        ]
    step_chart = _per_step(doc)
    return [
        *([step_chart] if step_chart else []),
        svg.render(
            svg.Chart("GPU activity over time", "session time (s)", "busy (%)", tuple(busy), marks)
        ),
        svg.render(
            svg.Chart(
                "GPU power and memory over time",
                "session time (s)",
                "power (W)",
                tuple(power),
                marks,
                y2_label="memory used (GiB)",
            )
        ),
    ]


def html_parts(doc: ReportDoc, table: HtmlTable) -> list[str]:
    """``<h2>GPU</h2>``: the per-step table and the charts (``table`` is the writer's)."""
    if not doc.get("gpu"):
        return []
    eff = efficiency_rows(doc)
    more = [table(list(EFFICIENCY_HEADER), eff)] if eff else []
    return ["<h2>GPU</h2>", table(list(HEADER), rows(doc)), *more, *charts(doc)]
