"""The report document (``report.json``) as types: what ``build_summary`` writes, what the
writers and ``compare`` read.

``TypedDict`` rather than dataclasses so the document is plain data at both edges: written by
one ``json.dumps`` and read back by one check (``infmon.report.docjson``), report.json's shape
and key order as the types list them. Numbers are ``float | None``: JSON has no NaN, so a
missing value is null (``docjson.json_ready``).

The types are what ``build_summary`` writes now (``tests/unit/test_report_doc.py`` holds it to
every key and value type here); a record is ``total=False`` when some sessions lack some of
its keys (a rate step has no ``concurrency``, a session without GPUs no ``gpu``). A document
read back (``parse_report``) has the complete top level, but a part written by an older infmon
of the same schema, an ``infmon bench --json`` result or an imported vLLM result may lack keys
added since (old server points have no prefix counters), so the readers of loaded runs
(``runs``, ``compare``, ``explain``) use ``.get``.
"""

from __future__ import annotations

from typing import Any, TypedDict

from infmon.model.base.jsontypes import JSON
from infmon.model.server.gpu_steps import StepGpuInfo
from infmon.model.steps.result import StepResultEntry
from infmon.report.perreq import PerRequestPart
from infmon.report.server_detail import ServerDetailPart

JournalLine = dict[str, Any]
"""An event or scrape as ``SessionReader`` yields it (``{"t", "kind", ...}``, ``{"t", "snap"}``),
or a payload inside one: the journal's own format, whose fields vary with the kind and the
infmon that wrote it; the report reads it by name and checks each value it uses."""
RecordedConfig = dict[str, JSON]
"""The session's recorded configuration (``Config.to_public_dict``), carried through: its
values' types are ``infmon.config``'s and the report reads only a few by name."""

SCHEMA = "infmon.report/1"
BENCH_SCHEMA = "infmon.bench/1"
"""``infmon bench --json``: its ``steps[]``, knee and target are the report's own."""


class EndpointCount(TypedDict):
    url: str
    requests: int
    failed: int


class TargetInfo(TypedDict, total=False):
    """The resolved target (the ``target`` event) over the configured one."""

    url: str | None
    """With several endpoints, all of them joined by ``, ``."""
    model: str | None
    endpoint: str | None
    endpoints: list[EndpointCount]
    """Only with more than one endpoint: each one's requests."""
    load_thread: str
    """How the load threads were scheduled (real-time or normal, and why); absent: not said."""


class SessionInfo(TypedDict, total=False):
    dir: str
    started_wall_s: float | None
    label: str | None
    requests: int
    failed: int
    cancelled: int
    warmup_excluded: int
    tokens_estimated: int
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    skipped_lines: int
    ended_cleanly: bool
    journal: dict[str, object]
    """The journal writer's status at the end of a run (``JournalStatus.to_dict``), shown as
    recorded; only when the writer gave it."""
    reports_dir: str
    """Only when the reports went somewhere other than the session directory."""


class WorkloadInfo(TypedDict, total=False):
    """What was sent: the ``workload`` event (``infmon.load.feed.WorkloadInfo``); empty when
    the session recorded none (the monitor, older sessions)."""

    workload: str
    seed: int
    sizing: str
    exact: bool
    prompt_tokens: str
    output_tokens: str
    lockstep: bool
    shared_prefix_tokens: int
    prefix_groups: int
    turns: int
    trace: str | None
    schedule: str | None
    server_started_s: float | None
    wall: float
    """When the journal wrote the event (wall clock)."""


class ServerConfig(TypedDict, total=False):
    """The latest known value of each configuration field the scrapes published."""

    backend: str
    backend_version: str
    models: list[str]
    max_model_len: int
    kv_capacity_tokens: int
    kv_block_size_tokens: int
    kv_num_gpu_blocks: int
    cache_config: dict[str, str]
    """The labels of ``cache_config_info``, as the server wrote them."""
    spec_config: dict[str, str]
    """The labels of a ``speculative_config_info`` gauge (the drafter), when published."""
    spec_decode_positions: int
    cache_dtype: str
    restarts_seen: int


class MemoryBudget(TypedDict):
    kv_capacity_tokens: int
    tokens_per_seq: float | None
    kv_capacity_seqs: int | None


class ServerWindow(TypedDict, total=False):
    """Mean and max of the server timeline over a step (``ServerSeries.window``)."""

    kv_usage_mean: float | None
    kv_usage_max: float | None
    running_mean: float | None
    running_max: float | None
    waiting_mean: float | None
    waiting_max: float | None
    preemptions_per_s_mean: float | None
    preemptions_per_s_max: float | None
    gen_tok_s_mean: float | None
    gen_tok_s_max: float | None
    acceptance_rate_mean: float | None
    acceptance_rate_max: float | None
    mean_acceptance_length_mean: float | None
    mean_acceptance_length_max: float | None
    scrapes: int
    prefix_hit_rate: float | None


class StepEfficiencyInfo(TypedDict):
    """Output tokens per joule of the step's serving GPUs (``Efficiency.to_dict``)."""

    power_w: float | None
    tok_s_per_w: float | None
    j_per_token: float | None
    gpus: int


class StepEntry(StepResultEntry, total=False):
    """One ``steps[]`` entry: ``StepResult.to_dict`` (the bench's own), where it sat in the
    session, and the server's and GPUs' figures over its time."""

    complete: bool
    """False for a step the session never ended (a killed run)."""
    server: ServerWindow
    gpu: list[StepGpuInfo]
    """Only in a session with GPU data."""
    efficiency: StepEfficiencyInfo
    """Only where the step's GPUs reported power."""


class KneeInfo(TypedDict):
    """The knee of the throughput curve (``Knee.to_dict``)."""

    concurrency: int
    reason: str
    confirmed: bool
    evidence: str


class _ClientPointTpot(TypedDict, total=False):
    tpot_ms_mean: float | None
    """Reports from before the TPOT chart lack it."""


class ClientPoint(_ClientPointTpot):
    """One bin of the client timeline: requests binned at their completion, output tokens at
    their chunks' arrival (as the server counts them)."""

    t_s: float
    out_tok_s: float
    req_s: float
    failed: int
    ttft_ms_mean: float | None
    e2el_ms_mean: float | None


class ServerPoint(TypedDict):
    """One scrape of the server timeline."""

    t_s: float
    kv_usage: float | None
    running: float | None
    waiting: float | None
    preemptions_per_s: float | None
    gen_tok_s: float | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    prefix_hits_total: float | None
    prefix_queries_total: float | None


class EventMark(TypedDict, total=False):
    """An operator action or notable event: the journal event as written, its session-relative
    time ``t_s`` added. Its fields vary by kind: the common ones and those the report reads
    are named here; any other field of the event is carried through as it was written."""

    kind: str
    t: float
    wall: float
    t_s: float
    origin: str
    warmup_s: float
    note: str
    label: str
    step: int
    index: int
    mode: str
    level: float
    concurrency: int
    rate: float
    error_kind: str
    error: str
    down_s: float
    text: str


class QualityInfo(TypedDict, total=False):
    """The session's quality run (``infmon quality --json``, ``infmon.quality.runner``); the
    ``baseline`` … ``baseline_accuracy`` keys only when it ran against a baseline."""

    schema: str
    url: str
    model: str | None
    endpoint: str
    temperature: float
    probes: int
    correct: int
    errors: int
    accuracy: float | None
    baseline: str | None
    compared: int
    agreement: float | None
    length_ratio: float | None
    first_divergence: dict[str, int]
    baseline_accuracy: float | None
    results: list[dict[str, Any]]
    """Per-probe rows as ``infmon.quality`` writes them (their fields vary with the probe and
    its outcome); read by ``infmon.quality.scoring.drift``, which takes such dicts."""


class GpuInfo(TypedDict):
    key: str
    label: str
    name: str | None
    serving: bool
    mem_total_gib: float | None
    power_limit_w: float | None


class GpuPoint(TypedDict):
    t_s: float
    key: str
    activity: float | None
    dram: float | None
    power_w: float | None
    mem_used_gib: float | None
    sm_clock_mhz: float | None


class GpuSection(TypedDict):
    """The session's GPUs and their timeline (charts)."""

    gpus: list[GpuInfo]
    timeline: list[GpuPoint]


class GpuPart(TypedDict, total=False):
    gpu: GpuSection
    """Only in a session with GPU data."""


class _ImportedPart(TypedDict, total=False):
    imported_from: str
    """Only in a run imported for a comparison (``vllm bench serve``)."""


class ReportDoc(GpuPart, PerRequestPart, ServerDetailPart, _ImportedPart):
    """The whole document: every key but the optional parts' always written, in report.json's
    order (``gpu`` between ``diagnosis`` and ``caveats``)."""

    schema: str
    session: SessionInfo
    target: TargetInfo
    workload: WorkloadInfo
    config: RecordedConfig
    server: ServerConfig
    memory_budget: MemoryBudget | None
    steps: list[StepEntry]
    knee: KneeInfo | None
    slo_max_concurrency: int | None
    timeline: list[ClientPoint]
    server_timeline: list[ServerPoint]
    events: list[EventMark]
    quality: QualityInfo | None
    diagnosis: list[str]
    caveats: list[str]
