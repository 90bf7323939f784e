"""The frozen views the live panes render: ``Session.snapshot(now)`` builds one per tick.

Everything a pane shows is computed here in ``model/``, so a pane never does arithmetic and two
equal snapshots never repaint. Missing values are ``nan`` (or None), never 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infmon.model.compare.baseline import BaselineView, LevelComparison, SpecLevel
from infmon.model.live.anatomy_live import AnatomyView
from infmon.model.records.measures import SLO
from infmon.model.search.frontier import FrontierView
from infmon.model.server.families import DetailView
from infmon.model.server.gpu_state import GpuView
from infmon.model.steps.knee import SLO_ATTAINMENT
from infmon.model.steps.span import CLOSED, Mode

NAN = math.nan


@dataclass(frozen=True, slots=True)
class Percentiles:
    """p50/p90/p99 of one latency over the live window, in seconds (nan when no data)."""

    p50_s: float = NAN
    p90_s: float = NAN
    p99_s: float = NAN
    count: int = 0


@dataclass(frozen=True, slots=True)
class HeaderView:
    endpoint: str = ""
    model: str | None = None
    backend: str | None = None
    backend_version: str | None = None
    load_mode: Mode = CLOSED
    """Closed loop (fixed concurrency) or rate (open loop, requests/s)."""
    load_level: float = 0.0
    state: str = "paused"
    """One of: paused, running, sweeping (searching, with ``--search``), server down."""
    elapsed_s: float = 0.0
    inflight_requests: int | None = None
    baseline_step: int | None = None
    failed: int = 0
    """Requests that failed this session (cancelled ones are not failures)."""
    cancelled: int = 0
    """Requests cancelled by the operator (a quit, a level lowered mid-stream)."""
    sweep: str | None = None
    """``sweep 7/11 · c=64 · 12 s left`` while the sweep runs."""
    backoff: str | None = None
    """``backing off 0.8 s after 5 failures`` while the load backs off."""
    journal: str | None = None
    """What the session record cannot write (a full disk), while it lasts."""
    baseline_run: str | None = None
    """The run compared against (``--baseline RUN``)."""
    baseline_changes: tuple[str, ...] = ()
    """The server-config difference: ``dtype auto → fp8``, ``speculative: none → draft k=3``."""
    started: bool = False
    """Load has run at some point (the footer says "space start" until it has)."""
    paused: bool = True
    """The load is held (whatever the server's state): the footer offers start / resume."""
    hint: str | None = None
    """A line telling the operator what to do or what is happening: ``paused: space starts
    c=1, w sweeps`` before anything ran, ``quitting: writing the report…`` on the way out."""
    baseline_label: str | None = None
    """``c=8``: the level of the baseline step."""
    search: str | None = None
    """The goal ``w`` searches for (``--search slo``: "slo"); None: ``w`` sweeps."""


@dataclass(frozen=True, slots=True)
class ThroughputView:
    client_output_tokens_per_s: float = NAN
    server_generation_tokens_per_s: float = NAN
    requests_per_s: float = NAN
    goodput_requests_per_s: float = NAN
    error_fraction: float = NAN
    client_series: tuple[float, ...] = ()
    """One sample per second, oldest first."""
    server_series: tuple[float, ...] = ()
    mark_offsets: tuple[int, ...] = ()
    """Indices into the series where the operator set a mark."""
    baseline_output_tokens_per_s: float = NAN
    step_marks: tuple[tuple[int, str], ...] = ()
    """Indices into the series where a step began, with its level (``c=4``)."""
    baseline: BaselineStep | None = None


@dataclass(frozen=True, slots=True)
class BaselineStep:
    """The baseline step (``b``) as the throughput pane compares against it."""

    step: int
    level_label: str
    output_tokens_per_s: float
    same_level: bool
    """The running step is at the baseline's level (and is not the baseline itself)."""
    delta_fraction: float = NAN
    """Running step's tok/s over the baseline's, minus one (nan unless ``same_level``)."""


@dataclass(frozen=True, slots=True)
class LatencyView:
    ttft: Percentiles = field(default_factory=Percentiles)
    tpot: Percentiles = field(default_factory=Percentiles)
    itl: Percentiles = field(default_factory=Percentiles)
    e2el: Percentiles = field(default_factory=Percentiles)
    slo: SLO = field(default_factory=SLO)
    ttft_p90_series: tuple[float, ...] = ()
    e2el_p90_series: tuple[float, ...] = ()
    tpot_p90_series: tuple[float, ...] = ()
    itl_p90_series: tuple[float, ...] = ()
    step_marks: tuple[tuple[int, str], ...] = ()
    ttft_meets_slo: bool | None = None
    """p90 TTFT within the SLO (the rule the pane shows); None: no SLO or no data."""
    tpot_meets_slo: bool | None = None
    e2el_meets_slo: bool | None = None
    anatomy: AnatomyView = field(default_factory=AnatomyView)
    """Each step's E2E split by the server's own per-request figures (``a`` shows it)."""


@dataclass(frozen=True, slots=True)
class SpecView:
    acceptance_rate: float = NAN
    mean_acceptance_length: float = NAN
    per_position_acceptance: tuple[float, ...] = ()
    levels: tuple[SpecLevel, ...] = ()
    """Per level held: acceptance, tokens per step, ITL ≈ L × TPOT, and against the baseline
    at the same level the speed-up and break-even acceptance."""


@dataclass(frozen=True, slots=True)
class EndpointRow:
    """One endpoint (or pod, or engine) of a fleet, as the server pane lists them."""

    name: str
    running: float = NAN
    waiting: float = NAN
    kv_usage_fraction: float = NAN
    generation_tokens_per_s: float = NAN
    role: str | None = None
    """``prefill`` / ``decode`` in a disaggregated deployment, else None."""


@dataclass(frozen=True, slots=True)
class ServerView:
    """The server's own numbers, from its metrics (canonical across backends)."""

    has_data: bool = False
    up: bool = True
    no_metrics: bool = False
    """The server answers but publishes no ``/metrics``: there will be no data, not "not yet"."""
    down_since_s: float | None = None
    """Session-relative seconds when the server stopped answering."""
    stale_s: float = NAN
    """Seconds since the last good scrape."""
    error: str | None = None
    running: float = NAN
    max_num_seqs: float = NAN
    """Not published by vLLM: inferred from where running stopped while requests waited."""
    max_num_seqs_inferred: bool = False
    waiting: float = NAN
    kv_usage_fraction: float = NAN
    kv_capacity_tokens: float = NAN
    kv_capacity_seqs: float = NAN
    tokens_per_seq: float = NAN
    preemptions_per_s: float = NAN
    prefix_hit_rate: float = NAN
    queue_s: float = NAN
    prefill_s: float = NAN
    decode_s: float = NAN
    generation_tokens_per_s: float = NAN
    api_cpu_cores: float = NAN
    """The API server's process CPU over the last window, in cores (nan: not published)."""
    kv_series: tuple[float, ...] = ()
    spec: SpecView | None = None
    rows: tuple[EndpointRow, ...] = ()
    """One per endpoint/pod/engine when there are several (the figures above are their sum,
    KV usage their mean)."""
    detail: DetailView | None = None
    """vLLM's 2025–26 families: waiting by reason, prompt tokens by source, KV offload …"""


@dataclass(frozen=True, slots=True)
class StepPoint:
    """One step held at a load level: the knee view plots one point per step."""

    index: int
    mode: str
    level: float
    held_s: float
    output_tokens_per_s: float
    p90_e2el_s: float
    p90_ttft_s: float
    completed: int
    slo_attainment: float = NAN
    """Share of the step's measured requests that met the SLO (nan: no SLO or no requests)."""
    settled: bool = True
    """The step has ended and the requests it overlapped have finished: its figures are final."""
    eligible: bool = True
    """Held long enough (time and requests) to feed the knee."""
    revisit_of: int | None = None
    origin: str = "operator"
    counted: bool = True
    """The step the knee rule reads at its level (the first eligible one)."""
    growth_per_doubling: float = NAN
    """Throughput growth per doubling from the counted level below (nan: none below)."""

    @property
    def meets_slo(self) -> bool | None:
        """By the bench's rule (``infmon.model.steps.knee.SLO_ATTAINMENT``); None when unknown."""
        return None if math.isnan(self.slo_attainment) else self.slo_attainment >= SLO_ATTAINMENT


@dataclass(frozen=True, slots=True)
class KneeView:
    steps: tuple[StepPoint, ...] = ()
    knee_level: float | None = None
    slo_limit_level: float | None = None
    slo_text: str = ""
    """The SLO verdict (``c=32``, ``≥ 64, not reached``, ``none met``); empty: no SLO."""
    baseline_index: int | None = None
    knee_confirmed: bool = False
    """False while the knee is only a candidate: "knee ≈ c=N (confirming)"."""
    knee_reason: str = ""
    withdrawn: str = ""
    """A knee named earlier that the figures no longer hold, and why (``knee ≈ c=128 withdrawn:
    c=256 grew +21% per doubling from c=128``); empty: none, or named again."""
    kv_fill_level: float = NAN
    """Where the KV cache fills at the workload's mean prompt + output tokens."""
    knee_limit: str = ""
    """Which limit the knee came from: ``KV cache: …``, ``max_num_seqs ≈ 256 …``, ``compute …``."""
    baseline: tuple[LevelComparison, ...] = ()
    """Each level against the baseline run's at the same level (``--baseline``)."""
    frontier: FrontierView | None = None
    """The load search's probes as a frontier chart, from ``w`` with ``--search`` until the
    operator moves the load (None: no search)."""


@dataclass(frozen=True, slots=True)
class Event:
    at_s: float
    """Session-relative seconds."""
    kind: str
    """load, state, mark, error, server, diagnosis, sweep, report."""
    text: str
    count: int = 1
    """How many times in a row this was said (shown as ×N, not N lines)."""


@dataclass(frozen=True, slots=True)
class Cause:
    """One diagnosis, said once however long it lasts, with the steps it applied to."""

    key: str
    text: str
    """The latest wording (its figures as last seen)."""
    steps: tuple[int, ...] = ()
    active: bool = True
    """Still true at the last check (a past cause stays listed, muted)."""
    since_s: float = 0.0
    """Session-relative seconds when it was first seen."""


@dataclass(frozen=True, slots=True)
class DashboardSnapshot:
    header: HeaderView = field(default_factory=HeaderView)
    throughput: ThroughputView = field(default_factory=ThroughputView)
    latency: LatencyView = field(default_factory=LatencyView)
    server: ServerView = field(default_factory=ServerView)
    knee: KneeView = field(default_factory=KneeView)
    events: tuple[Event, ...] = ()
    diagnosis: tuple[Cause, ...] = ()
    baseline: BaselineView | None = None
    """This run against ``--baseline RUN``, level by level (None: no baseline run)."""
    gpu: GpuView = field(default_factory=GpuView)
