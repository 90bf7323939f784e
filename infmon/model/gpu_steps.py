"""The GPUs per load step, for reports: each journal scrape's GPUs made into the live pane's rows
(``GpuState``, so the report's GPU figures and the screen's agree), kept by time, then
summarised over a step's measured time (``StepGpu``: mean activity, DRAM and power, peak
memory, lowest SM clock, throttle reasons seen, the other holders with their mean SM share),
and the GPU rules (``gpu_rules``) applied to each step's figures (``step_lines``), so the
report names contention, an idle GPU or throttling on the step where it happened.

Pure. Memory: one ``GpuRow`` per GPU per scrape, at most ``MAX_GPUS`` GPUs per scrape.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from infmon.model.gpu import GpuRow, GpuState, HolderView
from infmon.model.gpu_rules import IDLE_ACTIVITY, LATENCY_RISE, contention_text, throttle_text
from infmon.model.server import GpuSnapshot

NAN = math.nan
MAX_GPUS = 16
"""GPUs kept per scrape (the report is about the serving ones)."""
LATENCY_RISE_MIN_MS = 50.0


def _mean(xs: Sequence[float]) -> float:
    v = [x for x in xs if not math.isnan(x)]
    return sum(v) / len(v) if v else NAN


def _min(xs: Sequence[float]) -> float:
    v = [x for x in xs if not math.isnan(x)]
    return min(v) if v else NAN


def _max(xs: Sequence[float]) -> float:
    v = [x for x in xs if not math.isnan(x)]
    return max(v) if v else NAN


def _json(x: float, digits: int = 4) -> float | None:
    return None if math.isnan(x) else round(x, digits)


@dataclass(frozen=True, slots=True)
class StepGpu:
    """One GPU (or MIG instance) over one step's time."""

    row: GpuRow
    """Its figures as a pane row: mean activity, DRAM and power, peak memory, lowest SM clock,
    every throttle reason seen, holders with their mean SM share and peak memory."""
    scrapes: int
    activity_max: float = NAN

    def to_dict(self) -> dict[str, Any]:
        r = self.row
        return {
            "key": r.key,
            "label": r.label,
            "name": r.name,
            "serving": r.serving,
            "scrapes": self.scrapes,
            "activity_mean": _json(r.activity),
            "activity_max": _json(self.activity_max),
            "activity_kind": r.activity_kind,
            "dram_mean": _json(r.dram),
            "dram_kind": r.dram_kind,
            "power_w_mean": _json(r.power_w, 1),
            "power_limit_w": _json(r.power_limit_w, 1),
            "mem_used_gib_max": _json(r.mem_used_gib, 3),
            "mem_total_gib": _json(r.mem_total_gib, 3),
            "sm_clock_mhz_min": _json(r.sm_clock_mhz, 0),
            "sm_clock_peak_mhz": _json(r.sm_clock_peak_mhz, 0),
            "throttle": list(r.throttle),
            "others": [
                {
                    "name": h.label,
                    "kind": h.kind,
                    "mem_gib_max": _json(h.mem_gib, 3),
                    "sm_percent_mean": _json(h.sm_percent, 1),
                }
                for h in r.others
            ],
        }


def _holders(rows: Sequence[GpuRow]) -> tuple[HolderView, ...]:
    """Each holder seen over the rows: its peak memory and mean SM share while present."""
    seen: dict[tuple[str, str, int | None, bool], list[HolderView]] = {}
    for r in rows:
        for h in r.holders:
            seen.setdefault((h.name, h.kind, h.pid, h.serving), []).append(h)
    return tuple(
        HolderView(
            name=name,
            kind=kind,
            pid=pid,
            mem_gib=_max([h.mem_gib for h in hs]),
            sm_percent=_mean([h.sm_percent for h in hs]),
            serving=serving,
        )
        for (name, kind, pid, serving), hs in seen.items()
    )


def summarise(rows: Sequence[GpuRow]) -> StepGpu:
    """One GPU's rows over a step (oldest first, at least one) → its step figures."""
    last = rows[-1]
    reasons = sorted({x for r in rows for x in r.throttle})
    row = replace(
        last,
        activity=_mean([r.activity for r in rows]),
        dram=_mean([r.dram for r in rows]),
        power_w=_mean([r.power_w for r in rows]),
        mem_used_gib=_max([r.mem_used_gib for r in rows]),
        sm_clock_mhz=_min([r.sm_clock_mhz for r in rows]),
        sm_clock_peak_mhz=_max([r.sm_clock_peak_mhz for r in rows]),
        throttle=tuple(reasons),
        holders=_holders(rows),
        serving=any(r.serving for r in rows),
    )
    return StepGpu(row, len(rows), _max([r.activity for r in rows]))


def _serving_pods(snap: Mapping[str, Any]) -> frozenset[str]:
    pods = set()
    for e in snap.get("engines") or ():
        labels = e.get("labels") if isinstance(e, Mapping) else None
        if isinstance(labels, Mapping) and e.get("gpus") and "pod" in labels:
            pods.add(str(labels["pod"]))
    return frozenset(pods)


@dataclass
class GpuTimeline:
    """Journal scrapes' GPU rows by session time (seconds from the session's origin)."""

    origin_s: float = 0.0
    _state: GpuState = field(default_factory=GpuState)
    _t: list[float] = field(default_factory=list)
    _rows: list[tuple[GpuRow, ...]] = field(default_factory=list)
    _order: dict[str, GpuRow] = field(default_factory=dict)
    """Every GPU seen, by key: its last row."""

    def add_scrape(self, scrape: Mapping[str, Any]) -> None:
        """One journal scrape line (``{"t": …, "snap": ServerSnapshot.to_dict()}``)."""
        t, snap = scrape.get("t"), scrape.get("snap")
        if not isinstance(t, (int, float)) or not isinstance(snap, Mapping):
            return
        raw = snap.get("gpus")
        if not isinstance(raw, list) or not raw or snap.get("state", "ok") != "ok":
            return
        gpus = tuple(GpuSnapshot.from_dict(g) for g in raw[:MAX_GPUS] if isinstance(g, Mapping))
        self._state.add_gpus(gpus, _serving_pods(snap), float(t))
        rows = self._state.rows()
        t_s = float(t) - self.origin_s
        i = bisect.bisect_right(self._t, t_s)
        self._t.insert(i, t_s)
        self._rows.insert(i, rows)
        for r in rows:
            self._order[r.key] = r

    def __bool__(self) -> bool:
        return bool(self._t)

    def keys(self) -> list[str]:
        """Every GPU seen, the serving ones first."""
        return sorted(self._order, key=lambda k: (not self._order[k].serving, k))

    def last_rows(self) -> list[GpuRow]:
        return [self._order[k] for k in self.keys()]

    def step(self, start_s: float, end_s: float) -> tuple[StepGpu, ...]:
        """Each GPU over ``[start_s, end_s]`` (session seconds), serving GPUs first."""
        lo, hi = bisect.bisect_left(self._t, start_s), bisect.bisect_right(self._t, end_s)
        per: dict[str, list[GpuRow]] = {}
        for rows in self._rows[lo:hi]:
            for r in rows:
                per.setdefault(r.key, []).append(r)
        return tuple(summarise(per[k]) for k in self.keys() if k in per)

    def points(self) -> list[tuple[float, GpuRow]]:
        """Every (time, row), oldest first."""
        return [(t, r) for t, rows in zip(self._t, self._rows, strict=True) for r in rows]


def _idle_text(
    gpus: Sequence[StepGpu], waiting_max: float | None, ttft_p90_ms: float | None, low: float | None
) -> str | None:
    """The step's busiest serving GPU stayed under ``IDLE_ACTIVITY`` on average while requests
    waited on the server or the step's TTFT p90 rose well above an earlier step's."""
    serving = [g for g in gpus if g.row.serving and not math.isnan(g.activity_max)]
    if not serving:
        return None
    busiest = max(g.activity_max for g in serving)
    mean = max(g.row.activity for g in serving if not math.isnan(g.row.activity))
    if mean >= IDLE_ACTIVITY:
        return None
    rose = (
        ttft_p90_ms is not None
        and low is not None
        and ttft_p90_ms >= LATENCY_RISE * low
        and ttft_p90_ms - low >= LATENCY_RISE_MIN_MS
    )
    if rose:
        why = f"TTFT p90 {low:.0f} → {ttft_p90_ms:.0f} ms"
    elif waiting_max is not None and waiting_max > 0:
        why = f"up to {waiting_max:.0f} waiting"
    else:
        return None
    return (
        "GPU idle while requests wait: the bottleneck is before the GPU (CPU, tokenizer, API "
        f"server): GPU {mean:.0%} busy on average (at most {busiest:.0%}), {why}"
    )


def step_lines(
    gpus: Sequence[StepGpu],
    *,
    waiting_max: float | None = None,
    ttft_p90_ms: float | None = None,
    lowest_earlier_ttft_p90_ms: float | None = None,
) -> list[str]:
    """The GPU rules on one step's figures: contention (another holder computing on a serving
    GPU), an idle GPU while requests wait, throttling with the clock drop."""
    rows = tuple(g.row for g in gpus)
    serving = tuple(r for r in rows if r.serving)
    found = [
        contention_text(rows),
        _idle_text(gpus, waiting_max, ttft_p90_ms, lowest_earlier_ttft_p90_ms),
        throttle_text(serving or rows),
    ]
    return [x for x in found if x is not None]
