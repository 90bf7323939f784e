"""The GPUs behind the server, as the live session sees them: one row per GPU (or MIG instance)
for the GPU pane, and the evidence the GPU diagnosis rules read (``infmon.model.live.gpu_rules``).

Which GPUs serve the model, and who else is on them:

- a pod the fleet view joined to a GPU (``EngineSnapshot.gpus``, from Prometheus) is the server
  on that GPU; every other pod or process on it is *another* holder;
- without a join, the holder with the most memory on a GPU is taken for the server (vLLM takes
  ``gpu_memory_utilization`` of the card, 0.9 by default); the only holder of a GPU is its server;
- a GPU nobody is known to hold counts as serving when no GPU has a known holder (one host, one
  server: DCGM without Kubernetes, NVML without process rights).

Pure: fed ``ServerSnapshot``s with the time they arrived; memory is bounded (a few samples per GPU).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from infmon.model.server.gpu import GpuProcess, GpuSnapshot
from infmon.model.server.snapshot import ServerSnapshot

NAN = math.nan
MIB_PER_GIB = 1024.0
HISTORY = 120
"""Activity samples kept per GPU (one per scrape)."""
THROTTLING = frozenset(
    {"power cap", "power brake (hw)", "thermal (sw)", "thermal (hw)", "hw slowdown"}
)
"""Throttle reasons that cost clock speed under load (idle, sync boost … do not)."""


def _f(x: float | None) -> float:
    return NAN if x is None else float(x)


@dataclass(frozen=True, slots=True)
class HolderView:
    """A pod or process on a GPU."""

    name: str
    kind: str
    pid: int | None = None
    mem_gib: float = NAN
    sm_percent: float = NAN
    serving: bool = False
    """This holder is (taken for) the model server."""

    @property
    def label(self) -> str:
        return f"{self.name} (pid {self.pid})" if self.pid is not None else self.name


@dataclass(frozen=True, slots=True)
class GpuRow:
    """One GPU or MIG instance, everything the pane shows of it."""

    key: str
    label: str
    """``GPU 0``, ``GPU 0/7 (1g.10gb)``; with the host when there are several."""
    name: str | None = None
    activity: float = NAN
    """0–1: graphics-engine activity, else SM activity, else GPU_UTIL."""
    activity_kind: str = "SM"
    dram: float = NAN
    """0–1: ``DCGM_FI_PROF_DRAM_ACTIVE``, else the memory-copy utilisation."""
    dram_kind: str = "DRAM"
    mem_used_gib: float = NAN
    mem_total_gib: float = NAN
    power_w: float = NAN
    power_limit_w: float = NAN
    sm_clock_mhz: float = NAN
    sm_clock_peak_mhz: float = NAN
    """The published maximum SM clock, else the highest seen this session."""
    temp_c: float = NAN
    throttle: tuple[str, ...] = ()
    """Active reasons that cost clock speed (plus "power violation"/"thermal violation" when
    the violation counters grew since the last scrape)."""
    holders: tuple[HolderView, ...] = ()
    serving: bool = False

    @property
    def others(self) -> tuple[HolderView, ...]:
        return tuple(h for h in self.holders if not h.serving)


@dataclass(frozen=True, slots=True)
class GpuView:
    """The GPU pane's input; ``shown`` when there is GPU data or a GPU source was asked for."""

    configured: bool = False
    source: str | None = None
    note: str | None = None
    """Why there is no GPU data, quietly ("no GPU data: NVML … not installed")."""
    rows: tuple[GpuRow, ...] = ()

    @property
    def shown(self) -> bool:
        return self.configured or bool(self.rows)


@dataclass(frozen=True, slots=True)
class GpuEvidence:
    """What the GPU diagnosis rules read: the serving GPUs now, and their recent activity."""

    rows: tuple[GpuRow, ...] = ()
    activity_history: tuple[float, ...] = ()
    """The busiest serving GPU's activity, one value per scrape, oldest first."""

    @property
    def serving(self) -> tuple[GpuRow, ...]:
        return tuple(r for r in self.rows if r.serving)

    @property
    def busiest_activity(self) -> float:
        values = [r.activity for r in self.serving if not math.isnan(r.activity)]
        return max(values) if values else NAN


def _label(g: GpuSnapshot, many_hosts: bool) -> str:
    text = f"GPU {g.index}" + (f" ({g.mig_profile})" if g.mig_profile else "")
    return f"{g.hostname} {text}" if many_hosts and g.hostname else text


def _holders(g: GpuSnapshot, serving_pods: frozenset[str]) -> tuple[HolderView, ...]:
    procs = list(g.processes)
    if not procs:
        return ()
    joined = {p.name for p in procs if p.kind == "pod" and p.name in serving_pods}
    if serving_pods and not joined:
        server: GpuProcess | None = None  # the fleet's pods are elsewhere: all are others
    elif joined:
        server = next(p for p in procs if p.name in joined)
    else:
        server = max(procs, key=lambda p: -1.0 if p.mem_used_mib is None else p.mem_used_mib)
    return tuple(
        HolderView(
            name=p.name,
            kind=p.kind,
            pid=p.pid,
            mem_gib=_f(p.mem_used_mib) / MIB_PER_GIB,
            sm_percent=_f(p.sm_percent),
            serving=p is server or (p.kind == "pod" and p.name in joined),
        )
        for p in procs
    )


def _activity(g: GpuSnapshot) -> tuple[float, str]:
    if g.engine_active is not None:
        return g.engine_active, "SM"
    if g.sm_active is not None:
        return g.sm_active, "SM"
    if g.util_percent is not None:
        return g.util_percent / 100.0, "util"
    return NAN, "SM"


def _dram(g: GpuSnapshot) -> tuple[float, str]:
    if g.dram_active is not None:
        return g.dram_active, "DRAM"
    if g.mem_copy_util_percent is not None:
        return g.mem_copy_util_percent / 100.0, "mem"
    return NAN, "DRAM"


@dataclass
class _Track:
    """What one GPU's rows need from earlier scrapes."""

    peak_clock_mhz: float = NAN
    last_t: float = NAN
    power_violation_us: float = NAN
    thermal_violation_us: float = NAN
    violations: tuple[str, ...] = ()

    def update(self, t: float, g: GpuSnapshot) -> None:
        if g.sm_clock_mhz is not None and not (g.sm_clock_mhz <= self.peak_clock_mhz):
            self.peak_clock_mhz = g.sm_clock_mhz
        grew = []
        for name, value, last in (
            ("power violation", g.power_violation_us, self.power_violation_us),
            ("thermal violation", g.thermal_violation_us, self.thermal_violation_us),
        ):
            dt_us = (t - self.last_t) * 1e6
            if value is None or math.isnan(last) or not dt_us > 0:
                continue
            if 0.05 * dt_us < value - last <= 1.5 * dt_us:  # throttled 5% of the window
                grew.append(name)
        self.violations = tuple(grew)
        self.power_violation_us = _f(g.power_violation_us)
        self.thermal_violation_us = _f(g.thermal_violation_us)
        self.last_t = t


@dataclass
class GpuState:
    """The live session's GPUs: the last snapshot's rows, tracked over scrapes."""

    configured: bool = False
    source: str | None = None
    note: str | None = None
    _gpus: tuple[GpuSnapshot, ...] = ()
    _serving_pods: frozenset[str] = frozenset()
    _tracks: dict[str, _Track] = field(default_factory=dict)
    _history: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    _rows: tuple[GpuRow, ...] | None = None

    def add(self, snap: ServerSnapshot, t: float) -> None:
        self.configured = self.configured or snap.gpu_source is not None
        self.source = snap.gpu_source or self.source
        self.note = snap.gpu_note
        pods = frozenset(v for e in snap.engines if e.gpus for k, v in e.labels if k == "pod")
        self.add_gpus(snap.gpus, pods, t)

    def add_gpus(
        self, gpus: tuple[GpuSnapshot, ...], serving_pods: frozenset[str], t: float
    ) -> None:
        """One scrape's GPUs, with the pods the fleet view joined to a GPU (the servers)."""
        self._gpus = gpus
        self._serving_pods = serving_pods
        for g in gpus:
            self._tracks.setdefault(g.key, _Track()).update(t, g)
        if len(self._tracks) > 4 * max(1, len(gpus)) + 64:  # GPUs that went away
            live = {g.key for g in gpus}
            self._tracks = {k: v for k, v in self._tracks.items() if k in live}
        self._rows = None
        busiest = GpuEvidence(self.rows()).busiest_activity
        self._history.append(busiest)

    def rows(self) -> tuple[GpuRow, ...]:
        if self._rows is None:
            self._rows = build_rows(self._gpus, self._serving_pods, self._tracks)
        return self._rows

    def view(self) -> GpuView:
        return GpuView(self.configured, self.source, self.note, self.rows())

    def evidence(self) -> GpuEvidence | None:
        rows = self.rows()
        return GpuEvidence(rows, tuple(self._history)) if rows else None


def build_rows(
    gpus: Iterable[GpuSnapshot],
    serving_pods: frozenset[str] = frozenset(),
    tracks: dict[str, _Track] | None = None,
) -> tuple[GpuRow, ...]:
    """The pane's rows; which GPUs serve (see the module docstring)."""
    gpus = tuple(gpus)
    many_hosts = len({g.hostname for g in gpus}) > 1
    tracks = tracks or {}
    rows = [_row(g, many_hosts, serving_pods, tracks.get(g.key)) for g in gpus]
    if not any(r.holders for r in rows):
        rows = [_serving(r) for r in rows]
    return tuple(rows)


def _serving(r: GpuRow) -> GpuRow:
    return replace(r, serving=True)


def _row(
    g: GpuSnapshot, many_hosts: bool, serving_pods: frozenset[str], track: _Track | None
) -> GpuRow:
    activity, akind = _activity(g)
    dram, dkind = _dram(g)
    holders = _holders(g, serving_pods)
    peak = _f(g.sm_clock_max_mhz)
    if math.isnan(peak) and track is not None:
        peak = track.peak_clock_mhz
    reasons = tuple(r for r in (g.throttle_reasons or ()) if r in THROTTLING)
    return GpuRow(
        key=g.key,
        label=_label(g, many_hosts),
        name=g.name,
        activity=activity,
        activity_kind=akind,
        dram=dram,
        dram_kind=dkind,
        mem_used_gib=_f(g.mem_used_mib) / MIB_PER_GIB,
        mem_total_gib=_f(g.mem_total_mib) / MIB_PER_GIB,
        power_w=_f(g.power_w),
        power_limit_w=_f(g.power_limit_w),
        sm_clock_mhz=_f(g.sm_clock_mhz),
        sm_clock_peak_mhz=peak,
        temp_c=_f(g.temp_c),
        throttle=reasons + (track.violations if track is not None else ()),
        holders=holders,
        serving=any(h.serving for h in holders),
    )
