"""The report document (``report.json``) as types: what ``build_summary`` writes, what the
writers and ``compare`` read.

``TypedDict`` rather than dataclasses so the document is plain data at both edges: written by
one ``json.dumps`` (``write_report_json``) and read back by one check (``parse_report``), with
report.json's shape and key order exactly as the types list them. Numbers are ``float | None``:
JSON has no NaN, so a missing value is null (``json_ready``).

The top level is complete (every key is always written; ``tests/unit/test_report_doc.py`` holds
the writer to these types). The parts are ``total=False``: a report.json of the same schema
from an older infmon, an ``infmon bench --json`` result or a vLLM bench result imported for a
comparison holds a subset of their keys, so a reader of a part uses ``.get``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NotRequired, TypedDict

from infmon.journal.jsonio import _clean, write_json_atomic

JournalLine = dict[str, Any]
"""An event or scrape as ``SessionReader`` yields it (``{"t", "kind", ...}``, ``{"t", "snap"}``):
the journal's own format, whose fields vary with the kind and the infmon that wrote it; the
report reads it by name and checks each value it uses."""

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
    spec_decode_positions: int
    cache_dtype: str
    restarts_seen: int


class MemoryBudget(TypedDict):
    kv_capacity_tokens: int
    tokens_per_seq: float | None
    kv_capacity_seqs: int | None


class Latency(TypedDict, total=False):
    """One latency of a step in milliseconds (``Distribution.to_ms_dict``)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class PromptLengths(TypedDict, total=False):
    """Prompt tokens asked for against those the server counted (``PromptTokens.to_dict``)."""

    count: int
    requested_mean: float | None
    counted_mean: float | None
    counted_p50: float | None
    counted_p99: float | None
    mismatch: float | None


class ServerEvidenceInfo(TypedDict, total=False):
    """The server's side of a step for the knee rule (``ServerEvidence.to_dict``)."""

    samples: int
    running_p50: float | None
    running_max: float | None
    waiting_p50: float | None
    kv_usage_max: float | None
    preemptions: float | None
    generation_tokens_per_s: float | None


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


class GpuHolder(TypedDict):
    name: str
    kind: str
    mem_gib_max: float | None
    sm_percent_mean: float | None


class StepGpuInfo(TypedDict):
    """One GPU over one step (``StepGpu.to_dict``)."""

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


class StepEntry(TypedDict, total=False):
    """One ``steps[]`` entry: ``StepResult.to_dict`` (the bench's own), where it sat in the
    session, and the server's and GPUs' figures over its time."""

    concurrency: int | None
    """Absent for a rate step; a vLLM bench result without ``max_concurrency`` has None."""
    rate: float
    duration_s: float | None
    completed: int
    failed: int
    cancelled: int
    warmup_excluded: int
    output_tokens: int
    prompt_tokens: int | None
    output_throughput_tok_s: float | None
    total_throughput_tok_s: float | None
    request_throughput_req_s: float | None
    goodput_req_s: float | None
    slo_attainment: float | None
    error_rate: float | None
    errors_by_kind: dict[str, int]
    ttft_ms: Latency
    tpot_ms: Latency
    itl_ms: Latency
    e2el_ms: Latency
    tokens_estimated: bool
    achieved_concurrency: float | None
    loop_lag_p99_ms: float | None
    client_limited: bool
    client_notes: list[str]
    prompt_lengths: PromptLengths
    send_lateness_p99_ms: float | None
    step: int
    level: str
    origin: str
    revisit_of: int | None
    start_s: float
    end_s: float | None
    measured_s: float
    eligible: bool
    settled: bool
    server_evidence: ServerEvidenceInfo | None
    complete: bool
    """False for a step the session never ended (a killed run)."""
    server: ServerWindow
    gpu: list[StepGpuInfo]
    """Only in a session with GPU data."""


class KneeInfo(TypedDict):
    """The knee of the throughput curve (``Knee.to_dict``)."""

    concurrency: int
    reason: str
    confirmed: bool
    evidence: str


class ClientPoint(TypedDict):
    """One bin of the client timeline: requests binned at their completion."""

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
    """An operator action or notable event: the journal event as written (its fields vary by
    kind; the ones the report reads are listed) with its session-relative time ``t_s``."""

    kind: str
    t: float
    t_s: float
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
    """The session's quality run (``infmon quality --json``, ``infmon.quality.runner``)."""

    probes: int
    correct: int
    errors: int
    accuracy: float | None
    agreement: float | None
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


class ReportDoc(GpuPart):
    """The whole document, its keys in report.json's order (``gpu`` only with GPU data)."""

    schema: str
    session: SessionInfo
    target: TargetInfo
    workload: WorkloadInfo
    config: dict[str, Any]
    """The session's recorded configuration (``Config.to_public_dict``), carried through: its
    values' types are ``infmon.config``'s and the report reads only a few by name."""
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
    imported_from: NotRequired[str]
    """Only in a run imported for a comparison (``vllm bench serve``)."""


class ReportFormatError(ValueError):
    """A JSON file that is not a report document (or a bench result of the same shape)."""


def json_ready(doc: ReportDoc) -> ReportDoc:
    """The document with every non-finite float as None (JSON has no NaN): the same keys, and
    the types already say ``float | None`` wherever a figure can be missing."""
    cleaned: ReportDoc = _clean(doc)
    return cleaned


def write_report_json(path: Path, doc: ReportDoc) -> None:
    """``report.json``: the one place a report document becomes JSON on disk (atomically;
    a NaN left in it is written as null)."""
    write_json_atomic(path, doc)


_OBJECTS = ("session", "target", "workload", "config", "server")
_LISTS = ("timeline", "server_timeline", "events", "diagnosis", "caveats")


def parse_report(raw: object, source: str) -> ReportDoc:
    """A parsed report.json (or ``infmon bench --json`` result) as the document, checked: the
    schema, ``steps`` a list of objects, each part of the type it has here. Keys an older
    report lacks are given the value a reader takes for "not recorded" ({}, [] or None).
    Raises ``ReportFormatError`` naming ``source`` and what is wrong."""
    if not isinstance(raw, dict):
        raise ReportFormatError(f"{source}: not a JSON object")
    schema = raw.get("schema")
    if schema not in (SCHEMA, BENCH_SCHEMA):
        raise ReportFormatError(f"{source}: schema {schema!r} is not {SCHEMA} or {BENCH_SCHEMA}")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ReportFormatError(f"{source}: `steps` is not a list of objects")
    for key, kind in [*((k, dict) for k in _OBJECTS), *((k, list) for k in _LISTS)]:
        if raw.get(key) is not None and not isinstance(raw[key], kind):
            raise ReportFormatError(f"{source}: `{key}` is not a JSON {kind.__name__}")
    for key in ("knee", "memory_budget", "quality"):
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise ReportFormatError(f"{source}: `{key}` is neither an object nor null")
    return _document(raw, steps, is_report=schema == SCHEMA)


def _obj(raw: dict[str, Any], key: str) -> Any:
    """``raw[key]`` (parsed JSON, an object when present), or {} when absent or null."""
    return raw.get(key) or {}


def _document(raw: dict[str, Any], steps: list[StepEntry], is_report: bool) -> ReportDoc:
    """The checked JSON as the document (``raw`` is parsed JSON: its values are whatever the
    file held, their containers checked by ``parse_report``)."""
    gpu: GpuPart = {"gpu": raw["gpu"]} if isinstance(raw.get("gpu"), dict) else {}
    return {
        "schema": raw["schema"],
        "session": _obj(raw, "session"),
        "target": _obj(raw, "target"),
        "workload": _obj(raw, "workload"),
        "config": _obj(raw, "config"),
        "server": _obj(raw, "server") if is_report else {},  # a bench result's is its health
        "memory_budget": raw.get("memory_budget"),
        "steps": steps,
        "knee": raw.get("knee"),
        "slo_max_concurrency": raw.get("slo_max_concurrency"),
        "timeline": raw.get("timeline") or [],
        "server_timeline": raw.get("server_timeline") or [],
        "events": raw.get("events") or [],
        "quality": raw.get("quality"),
        "diagnosis": raw.get("diagnosis") or [],
        **gpu,
        "caveats": raw.get("caveats") or [],
    }
