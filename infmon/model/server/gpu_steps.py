"""The GPUs per load step, for reports: each journal scrape's GPUs made into the live pane's rows
(``GpuState``, so the report's GPU figures and the screen's agree), kept by time, then
summarised over a step's measured time (``StepGpu``: mean activity, DRAM and power, peak
memory, lowest SM clock, throttle reasons seen, the other holders with their mean SM share),
and the GPU rules' texts (``gpu_text``) applied to each step's figures (``step_lines``), so the
report names contention, an idle GPU or throttling on the step where it happened.

Pure. Memory: columns of floats per GPU, about 100 bytes a GPU a scrape (at most ``MAX_GPUS``
GPUs a scrape); a step's figures are computed from them on demand.
"""

from __future__ import annotations

import bisect
import math
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from infmon.model.base.units import latency_text
from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.gpu_state import GpuRow, GpuState, HolderView
from infmon.model.server.gpu_text import IDLE_ACTIVITY, LATENCY_RISE, contention_text, throttle_text

NAN = math.nan
MAX_GPUS = 16
"""GPUs kept per scrape (the report is about the serving ones)."""
LATENCY_RISE_MIN_MS = 50.0


def _json(x: float, digits: int = 4) -> float | None:
    return None if math.isnan(x) else round(x, digits)


class GpuHolder(TypedDict):
    name: str
    kind: str
    mem_gib_max: float | None
    sm_percent_mean: float | None


class StepGpuInfo(TypedDict):
    """One GPU over one step (``StepGpu.to_dict``): a step's ``gpu`` in report.json."""

    key: str
    label: str
    name: str | None
    serving: bool
    scrapes: int
    activity_mean: float | None
    activity_max: float | None
    activity_kind: str
    dram_mean: float | None
    dram_kind: str
    power_w_mean: float | None
    power_limit_w: float | None
    mem_used_gib_max: float | None
    mem_total_gib: float | None
    sm_clock_mhz_min: float | None
    sm_clock_peak_mhz: float | None
    throttle: list[str]
    others: list[GpuHolder]


@dataclass(frozen=True, slots=True)
class StepGpu:
    """One GPU (or MIG instance) over one step's time."""

    row: GpuRow
    """Its figures as a pane row: mean activity, DRAM and power, peak memory, lowest SM clock,
    every throttle reason seen, holders with their mean SM share and peak memory."""
    scrapes: int
    activity_max: float = NAN

    def to_dict(self) -> StepGpuInfo:
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


_FIELDS = ("activity", "dram", "power_w", "mem_used_gib", "sm_clock_mhz", "sm_clock_peak_mhz")
_HolderKey = tuple[str, str, "int | None", bool]


def _nan_safe(values: array[float], fn: Any) -> float:
    v = [x for x in values if not math.isnan(x)]
    return float(fn(v)) if v else NAN


@dataclass
class _HolderColumn:
    """One holder of one GPU: its memory and SM share at each scrape it was seen in."""

    t: array[float] = field(default_factory=lambda: array("d"))
    mem_gib: array[float] = field(default_factory=lambda: array("d"))
    sm_percent: array[float] = field(default_factory=lambda: array("d"))

    def view(self, key: _HolderKey, start_s: float, end_s: float) -> HolderView | None:
        lo, hi = bisect.bisect_left(self.t, start_s), bisect.bisect_right(self.t, end_s)
        if lo >= hi:
            return None
        name, kind, pid, serving = key
        return HolderView(
            name=name,
            kind=kind,
            pid=pid,
            mem_gib=_nan_safe(self.mem_gib[lo:hi], max),
            sm_percent=_nan_safe(self.sm_percent[lo:hi], _avg),
            serving=serving,
        )


def _avg(v: list[float]) -> float:
    return sum(v) / len(v)


@dataclass
class _GpuColumn:
    """One GPU's rows over the session, as columns (about 100 bytes a scrape)."""

    last: GpuRow
    t: array[float] = field(default_factory=lambda: array("d"))
    values: dict[str, array[float]] = field(
        default_factory=lambda: {k: array("d") for k in _FIELDS}
    )
    serving: array[int] = field(default_factory=lambda: array("b"))
    throttle: list[tuple[str, ...]] = field(default_factory=list)
    holders: dict[_HolderKey, _HolderColumn] = field(default_factory=dict)

    def add(self, t_s: float, r: GpuRow, interned: dict[tuple[str, ...], tuple[str, ...]]) -> None:
        self.last = r
        self.t.append(t_s)
        for k in _FIELDS:
            self.values[k].append(getattr(r, k))
        self.serving.append(r.serving)
        self.throttle.append(interned.setdefault(r.throttle, r.throttle))
        for h in r.holders:
            col = self.holders.setdefault((h.name, h.kind, h.pid, h.serving), _HolderColumn())
            col.t.append(t_s)
            col.mem_gib.append(h.mem_gib)
            col.sm_percent.append(h.sm_percent)

    def window(self, start_s: float, end_s: float) -> StepGpu | None:
        lo, hi = bisect.bisect_left(self.t, start_s), bisect.bisect_right(self.t, end_s)
        if lo >= hi:
            return None
        v = {k: self.values[k][lo:hi] for k in _FIELDS}
        holders = (c.view(k, start_s, end_s) for k, c in self.holders.items())
        row = replace(
            self.last,
            activity=_nan_safe(v["activity"], _avg),
            dram=_nan_safe(v["dram"], _avg),
            power_w=_nan_safe(v["power_w"], _avg),
            mem_used_gib=_nan_safe(v["mem_used_gib"], max),
            sm_clock_mhz=_nan_safe(v["sm_clock_mhz"], min),
            sm_clock_peak_mhz=_nan_safe(v["sm_clock_peak_mhz"], max),
            throttle=tuple(sorted({x for reasons in self.throttle[lo:hi] for x in reasons})),
            holders=tuple(h for h in holders if h is not None),
            serving=any(self.serving[lo:hi]),
        )
        return StepGpu(row, hi - lo, _nan_safe(v["activity"], max))

    def points(self) -> list[tuple[float, dict[str, float]]]:
        return [(t, {k: self.values[k][i] for k in _FIELDS}) for i, t in enumerate(self.t)]


def serving_pods(snap: Mapping[str, Any]) -> frozenset[str]:
    pods = set()
    for e in snap.get("engines") or ():
        labels = e.get("labels") if isinstance(e, Mapping) else None
        if isinstance(labels, Mapping) and e.get("gpus") and "pod" in labels:
            pods.add(str(labels["pod"]))
    return frozenset(pods)


@dataclass
class GpuTimeline:
    """Journal scrapes' GPU rows by session time (seconds from the session's origin), kept as
    columns per GPU; scrapes must come in time order (the journal's)."""

    origin_s: float = 0.0
    _state: GpuState = field(default_factory=GpuState)
    _gpus: dict[str, _GpuColumn] = field(default_factory=dict)
    _interned: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)
    _last_t: float = -math.inf

    def add_scrape(self, scrape: Mapping[str, Any]) -> None:
        """One journal scrape line (``{"t": …, "snap": ServerSnapshot.to_dict()}``)."""
        t, snap = scrape.get("t"), scrape.get("snap")
        if not isinstance(t, (int, float)) or not isinstance(snap, Mapping):
            return
        raw = snap.get("gpus")
        if not isinstance(raw, list) or not raw or snap.get("state", "ok") != "ok":
            return
        t_s = float(t) - self.origin_s
        if t_s < self._last_t:
            return  # out of order: the columns are sorted by time
        self._last_t = t_s
        gpus = tuple(GpuSnapshot.from_dict(g) for g in raw[:MAX_GPUS] if isinstance(g, Mapping))
        self._state.add_gpus(gpus, serving_pods(snap), float(t))
        for r in self._state.rows():
            self._gpus.setdefault(r.key, _GpuColumn(r)).add(t_s, r, self._interned)

    def __bool__(self) -> bool:
        return bool(self._gpus)

    def gpu_keys(self) -> list[str]:
        """Every GPU seen, the serving ones first."""
        return sorted(self._gpus, key=lambda k: (not self._gpus[k].last.serving, k))

    def last_rows(self) -> list[GpuRow]:
        return [self._gpus[k].last for k in self.gpu_keys()]

    def step(self, start_s: float, end_s: float) -> tuple[StepGpu, ...]:
        """Each GPU over ``[start_s, end_s]`` (session seconds), serving GPUs first."""
        found = (self._gpus[k].window(start_s, end_s) for k in self.gpu_keys())
        return tuple(g for g in found if g is not None)

    def points(self, key: str) -> list[tuple[float, dict[str, float]]]:
        """One GPU's (time, figures) at every scrape, oldest first."""
        col = self._gpus.get(key)
        return col.points() if col is not None else []


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
    if rose and low is not None and ttft_p90_ms is not None:
        why = f"TTFT p90 {latency_text(low / 1e3)} → {latency_text(ttft_p90_ms / 1e3)}"
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
