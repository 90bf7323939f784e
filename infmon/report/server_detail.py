"""vLLM's 2025–26 families per step in a report (``doc["server_detail"]``) and their diagnosis
lines: why requests waited (capacity vs deferred), the prompt share served from the prefix
cache and from other instances, KV offload's share of the time, admission rejections, and MFU
(vLLM's estimated FLOP/s per GPU over the step, over the peak the scrapes carry).

Read from the journal's scrapes (``ServerSnapshot.to_dict()``) inside each step's time: gauges
as medians, counters as the increase from the step's first to its last scrape. A session whose
server published none of them has no section.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from infmon.model.server.efficiency import MFU_UNKNOWN

if TYPE_CHECKING:  # doc.py imports this module's part types
    from infmon.report.doc import JournalLine, StepEntry

OFFLOAD_LINE_FRACTION = 0.05


class StepDetailInfo(TypedDict):
    step: int
    label: str
    waiting_capacity_p50: float | None
    waiting_deferred_p50: float | None
    prompt_from_cache: float | None
    """``local_cache_hit`` share of the step's prompt tokens."""
    prompt_from_other_instances: float | None
    kv_offload_load_fraction: float | None
    kv_offload_load_bytes_per_s: float | None
    admission_rejections: float | None
    flops_per_s_per_gpu: float | None
    mfu: float | None
    """``flops_per_s_per_gpu`` over the GPU's peak (None: no estimates, or the peak unknown)."""
    peak_source: str | None


class ServerDetailPart(TypedDict, total=False):
    server_detail: list[StepDetailInfo]


def _num(x: object) -> float:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else math.nan


def _map(x: object) -> dict[str, float]:
    return {str(k): _num(v) for k, v in x.items()} if isinstance(x, Mapping) else {}


class _Point:
    __slots__ = (
        "by_source",
        "capacity",
        "deferred",
        "engines",
        "flops",
        "load_bytes",
        "load_s",
        "peak",
        "peak_source",
        "rejected",
        "t",
        "waiting",
    )

    def __init__(self, t: float, snap: Mapping[str, Any]) -> None:
        self.t = t
        reasons = _map(snap.get("waiting_by_reason"))
        self.waiting = _num(snap.get("waiting"))
        self.capacity, self.deferred = (
            reasons.get("capacity", math.nan),
            reasons.get("deferred", math.nan),
        )
        self.by_source = _map(snap.get("prompt_tokens_by_source_total"))
        off = snap.get("kv_offload")
        off = off if isinstance(off, Mapping) else {}
        self.load_s, self.load_bytes = (
            _num(off.get("load_time_s_total")),
            _num(off.get("load_bytes_total")),
        )
        rejected = _map(snap.get("admission_rejections_total"))
        self.rejected = sum(rejected.values()) if rejected else math.nan
        est = snap.get("estimates")
        est = est if isinstance(est, Mapping) else {}
        self.flops, self.peak = _num(est.get("flops_total")), _num(est.get("peak_flops_per_gpu"))
        source = est.get("peak_source")
        self.peak_source = source if isinstance(source, str) else None
        engines = snap.get("engines")
        self.engines = max(1, len(engines)) if isinstance(engines, list) else 1


class DetailTimeline:
    """The scrapes' 2025–26 figures, in time order (seconds after the session's origin)."""

    def __init__(self, origin_s: float) -> None:
        self.origin_s = origin_s
        self.points: list[_Point] = []

    def add(self, line: JournalLine) -> None:
        t, snap = line.get("t"), line.get("snap")
        if not isinstance(t, int | float) or not isinstance(snap, Mapping):
            return
        if not any(
            snap.get(k) is not None
            for k in (
                "waiting_by_reason",
                "prompt_tokens_by_source_total",
                "kv_offload",
                "admission_rejections_total",
                "estimates",
            )
        ):
            return
        self.points.append(_Point(float(t) - self.origin_s, snap))

    def step(self, index: int, label: str, start: float, end: float) -> StepDetailInfo | None:
        pts = [p for p in self.points if start <= p.t <= end]
        if not pts:
            return None
        first, last = pts[0], pts[-1]
        span = last.t - first.t
        agree = [p for p in pts if abs(p.capacity + p.deferred - p.waiting) < 0.5]
        return {
            "step": index,
            "label": label,
            "waiting_capacity_p50": _median([p.capacity for p in agree]),
            "waiting_deferred_p50": _median([p.deferred for p in agree]),
            "prompt_from_cache": _share(first, last, "local_cache_hit"),
            "prompt_from_other_instances": _share(first, last, "external_kv_transfer"),
            "kv_offload_load_fraction": _rate(first.load_s, last.load_s, span),
            "kv_offload_load_bytes_per_s": _rate(first.load_bytes, last.load_bytes, span),
            "admission_rejections": _delta(first.rejected, last.rejected),
            **_mfu(first, last, span),
        }


class _Mfu(TypedDict):
    flops_per_s_per_gpu: float | None
    mfu: float | None
    peak_source: str | None


def _mfu(first: _Point, last: _Point, span: float) -> _Mfu:
    rate = _rate(first.flops, last.flops, span)
    per_gpu = None if rate is None else rate / last.engines
    peak = None if math.isnan(last.peak) or last.peak <= 0 else last.peak
    return {
        "flops_per_s_per_gpu": per_gpu,
        "mfu": None if per_gpu is None or peak is None else per_gpu / peak,
        "peak_source": last.peak_source if peak is not None else None,
    }


def _median(values: list[float]) -> float | None:
    v = [x for x in values if not math.isnan(x)]
    return float(np.median(v)) if v else None


def _delta(a: float, b: float) -> float | None:
    return None if math.isnan(a) or math.isnan(b) or b < a else b - a


def _rate(a: float, b: float, span: float) -> float | None:
    d = _delta(a, b)
    return None if d is None or span <= 0 else d / span


def _share(first: _Point, last: _Point, source: str) -> float | None:
    if source not in last.by_source:
        return None
    inc = {k: _delta(first.by_source.get(k, math.nan), v) for k, v in last.by_source.items()}
    total = sum(v for v in inc.values() if v is not None)
    part = inc.get(source)
    return None if part is None or total <= 0 else part / total


def attach(steps: list[StepEntry], timeline: DetailTimeline) -> tuple[list[str], ServerDetailPart]:
    """Each step's figures and the diagnosis lines they give (empty without the families)."""
    from infmon.report.diagnosis import as_number, step_label  # it imports doc, doc imports us

    if not timeline.points:
        return [], {}
    rows: list[StepDetailInfo] = []
    for st in steps:
        start, end = as_number(st.get("start_s")), as_number(st.get("end_s"))
        index = st.get("step")
        if start is None or end is None or not isinstance(index, int):
            continue
        if (row := timeline.step(index, step_label(st), start, end)) is not None:
            rows.append(row)
    lines = [line for r in rows for line in _lines(r)] + _mfu_lines(rows)
    return lines, {"server_detail": rows} if rows else {}


def _mfu_lines(rows: list[StepDetailInfo]) -> list[str]:
    """The step of highest MFU, or why MFU cannot be said (FLOPs estimated, peak unknown)."""
    known = [r for r in rows if r["mfu"] is not None]
    if known:
        best = max(known, key=lambda r: r["mfu"] or 0.0)
        return [f"MFU peaks at {_pct(best['mfu'])} ({best['label']}; {best['peak_source']})"]
    if any(r["flops_per_s_per_gpu"] for r in rows):
        return [MFU_UNKNOWN]
    return []


def _lines(r: StepDetailInfo) -> list[str]:
    out = []
    cap, dfr = r["waiting_capacity_p50"], r["waiting_deferred_p50"]
    if cap is not None and dfr is not None and cap + dfr > 0:
        out.append(
            f"{r['label']}: queueing: {cap:.0f} waiting for capacity, {dfr:.0f} deferred (median)"
        )
    load = r["kv_offload_load_fraction"]
    if load is not None and load >= OFFLOAD_LINE_FRACTION:
        rate = r["kv_offload_load_bytes_per_s"]
        moved = f"{rate / 1e9:.1f} GB/s loaded back" if rate is not None else "KV loaded back"
        out.append(f"{r['label']}: KV offload: {moved}, {load:.0%} of the time spent loading")
    rejected = r["admission_rejections"]
    if rejected:
        out.append(f"{r['label']}: the server refused {rejected:.0f} requests at admission")
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


MarkdownTable = Callable[[tuple[str, ...], list[list[str]]], list[str]]


def markdown_lines(part: ServerDetailPart, table: MarkdownTable) -> list[str]:
    rows = part.get("server_detail")
    if not rows:
        return []
    head = (
        "step",
        "waiting: capacity / deferred",
        "prompt from cache",
        "from other instances",
        "KV offload loading",
        "admission rejections",
        "MFU",
    )
    body = [
        [
            r["label"],
            f"{_n(r['waiting_capacity_p50'])} / {_n(r['waiting_deferred_p50'])}",
            _pct(r["prompt_from_cache"]),
            _pct(r["prompt_from_other_instances"]),
            _pct(r["kv_offload_load_fraction"]),
            _n(r["admission_rejections"]),
            _pct(r["mfu"]),
        ]
        for r in rows
    ]
    return ["## Server queue and cache sources (vLLM ≥ 0.20)", "", *table(head, body), ""]
