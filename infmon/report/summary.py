"""Session directory → the report document (the content of ``report.json``), in one pass.

Records come from the journal one step at a time, as columns (``RecordColumns``: the journal's
step index, or for old JSON-lines sessions a stream grouped by ``record.step``); each step goes
to ``requests.csv`` and the over-time bins, and into the step ledger the live session used
(``report.steps``: the journal's step events replayed; its figures vectorised), and is dropped,
so memory follows the largest step, not the session. Sessions recorded before the step model
are summarised as they were then (``report.legacy_steps``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import numpy as np

from infmon.config import DEFAULT_LABEL
from infmon.journal.events import TargetResolved
from infmon.journal.reader import SessionReader
from infmon.model.base.jsontypes import JSON
from infmon.model.records.columns import MISSING, RecordColumns
from infmon.model.server.gpu_steps import GpuTimeline
from infmon.model.steps.evidence import ServerEvidence
from infmon.report import diagnosis, gpu, perreq, server_detail, stepstats
from infmon.report.doc import (
    SCHEMA,
    EventMark,
    JournalLine,
    QualityInfo,
    RecordedConfig,
    ReportDoc,
    ServerPoint,
    SessionInfo,
    StepEntry,
    TargetInfo,
    WorkloadInfo,
)
from infmon.report.legacy_steps import LegacySteps, step_events
from infmon.report.server import ServerSeries, memory_budget, server_config
from infmon.report.steps import ReportSteps
from infmon.report.timeline import ClientTimeline, server_point, thin

MARK_KINDS = (
    "mark",
    "baseline",
    "concurrency",
    "rate",
    "step_begin",
    "step_start",
    "step_end",
    "error",
    "server_down",
    "server_up",
    "restart",
    "pause",
    "resume",
    "quality",
    "worker_lost",
    "worker_replaced",
    "step_partial",
)


class _Totals:
    def __init__(self) -> None:
        self.requests = self.failed = self.cancelled = self.warmup = self.estimated = 0
        self.prompt_sum = self.prompt_n = self.output_sum = self.output_n = 0
        self.first_sent_s = math.inf
        self.last_end_s = -math.inf

    def add(self, c: RecordColumns) -> None:
        if not len(c):
            return
        ok = c.ok
        self.requests += len(c)
        self.cancelled += int(c.cancelled.sum())
        self.failed += int((~ok & ~c.cancelled).sum())
        self.warmup += int(c.warmup.sum())
        self.first_sent_s = min(self.first_sent_s, float(c.sent_s.min()))
        end = np.where(np.isnan(c.end_s), c.sent_s, c.end_s)
        self.last_end_s = max(self.last_end_s, float(end.max()))
        prompt = c.prompt_tokens[c.prompt_tokens != MISSING]
        self.prompt_sum += int(prompt.sum())
        self.prompt_n += int(prompt.size)
        self.estimated += int(c.tokens_estimated[ok].sum())
        self.output_sum += int(c.output_token_count[ok].sum())
        self.output_n += int(ok.sum())

    def mean_prompt(self) -> float:
        """Mean prompt tokens of the requests that have them (nan when none)."""
        return self.prompt_sum / self.prompt_n if self.prompt_n else math.nan

    def mean_output(self) -> float:
        """Mean output tokens of the successful requests (nan when none)."""
        return self.output_sum / self.output_n if self.output_n else math.nan


def _marks(events: list[JournalLine], origin_s: float) -> list[EventMark]:
    """Operator actions and notable events, with session-relative times (last 500)."""
    out = []
    for e in events:
        if e.get("kind") in MARK_KINDS and isinstance(e.get("t"), (int, float)):
            item = {k: v for k, v in e.items() if k != "stats"}
            item["t_s"] = e["t"] - origin_s
            out.append(cast(EventMark, item))  # the journal event's fields, as EventMark says
    return out[-500:]


def _text(value: JSON) -> str | None:
    """A recorded configuration's text field (None when absent or not text)."""
    return value if isinstance(value, str) else None


def _target(
    config: RecordedConfig, events: list[JournalLine], reader: SessionReader | None = None
) -> TargetInfo:
    """URL, model and endpoint: the resolved ones (``target`` event) over the configured ones;
    with several endpoints, ``url`` names them all and ``endpoints`` counts each one's requests."""
    out: TargetInfo = {
        "url": _text(config.get("url")),
        "model": _text(config.get("model")),
        "endpoint": _text(config.get("endpoint")),
    }
    urls: list[str] = []
    for e in events:
        if (ev := TargetResolved.from_payload(e)) is not None:
            if ev.url is not None:
                out["url"] = ev.url
            if ev.model is not None:
                out["model"] = ev.model
            if ev.endpoint is not None:
                out["endpoint"] = ev.endpoint
            if ev.load_thread:
                out["load_thread"] = ev.load_thread
            urls = list(ev.urls) or urls
    if len(urls) > 1:
        counts = reader.endpoint_counts() if reader is not None else {}
        out["url"] = ", ".join(map(str, urls))
        out["endpoints"] = [
            {"url": u, "requests": counts.get(i, (0, 0))[0], "failed": counts.get(i, (0, 0))[1]}
            for i, u in enumerate(urls)
        ]
    return out


def _workload(events: list[JournalLine]) -> WorkloadInfo:
    """What was sent (``workload`` event): kind, sizing, seed, lengths, prefixes, trace."""
    for e in events:
        if e.get("kind") == "workload":
            fields = {k: v for k, v in e.items() if k not in ("kind", "t")}
            return cast(WorkloadInfo, fields)  # bench writes ``WorkloadInfo.to_dict()`` here
    return {}


def _session(
    session_dir: Path, reader: SessionReader, totals: _Totals, events: list[JournalLine]
) -> SessionInfo:
    """Counts over the whole session (warm-up included) and how its record ended."""
    return {
        "dir": Path(session_dir).name,
        "started_wall_s": (reader.meta.get("clock_origin") or {}).get("wall_s"),
        "label": run_name(reader.config.get("label"), Path(session_dir)),
        "requests": totals.requests,
        "failed": totals.failed,
        "cancelled": totals.cancelled,
        "warmup_excluded": totals.warmup,
        "tokens_estimated": totals.estimated,
        "mean_prompt_tokens": _or_none(totals.mean_prompt()),
        "mean_output_tokens": _or_none(totals.mean_output()),
        "skipped_lines": reader.skipped[0],
        "ended_cleanly": any(e.get("kind") == "session_end" for e in events),
    }


def run_name(label: object, session_dir: Path) -> str:
    """A run's name: its ``--label``, or its directory's name when the label is the default
    (``runs/spec`` is "spec", never "run")."""
    if isinstance(label, str) and label.strip() and label != DEFAULT_LABEL:
        return label
    return Path(session_dir).absolute().name or "session"


def _or_none(x: float) -> float | None:
    return None if math.isnan(x) else x


class _Scrapes:
    """One pass over the journal's scrapes feeds every use: the server timeline, the steps'
    server evidence and the GPUs; ``server_config`` consumes the pass."""

    def __init__(self, reader: SessionReader, origin_s: float, steps: ReportSteps) -> None:
        self.reader, self.origin_s, self.steps = reader, origin_s, steps
        self.points: list[ServerPoint] = []
        self.gpus = GpuTimeline(origin_s)
        self.detail = server_detail.DetailTimeline(origin_s)

    def __iter__(self) -> Iterator[JournalLine]:
        for s in self.reader.iter_scrapes():
            if p := server_point(s, self.origin_s):
                self.points.append(p)
            self.steps.add_scrapes((s,))
            self.gpus.add_scrape(s)
            self.detail.add(s)
            yield s


def _read_records(
    reader: SessionReader,
    steps: ReportSteps,
    legacy: LegacySteps | None,
    origin_s: float,
    on_columns: Callable[[RecordColumns], None] | None,
) -> tuple[ClientTimeline, _Totals]:
    """One pass over the records, a step of columns at a time, into the steps, the client
    timeline and the totals (each step then dropped: memory follows the largest step)."""
    timeline, totals = ClientTimeline(origin_s), _Totals()
    for idx, records in reader.iter_step_columns():
        totals.add(records)
        timeline.add(records)
        if legacy is not None:
            legacy.add(idx, records)
        else:
            steps.add_columns(idx, records)
        if on_columns is not None:
            on_columns(records)
    return timeline, totals


def build_summary(
    session_dir: Path, on_columns: Callable[[RecordColumns], None] | None = None
) -> ReportDoc:
    """The report document of a session; ``on_columns`` sees every step's records once (CSV)."""
    return summary_and_steps(session_dir, on_columns)[0]


def summary_and_steps(
    session_dir: Path,
    on_columns: Callable[[RecordColumns], None] | None = None,
    levels: bool = False,
) -> tuple[ReportDoc, ReportSteps]:
    """``build_summary``, with the steps it was built from (``levels``: their ledger kept
    every step's level, for a comparison of runs: ``ReportSteps.levels``)."""
    reader = SessionReader(Path(session_dir))
    config, origin_s = reader.config, reader.origin_s()
    events = list(reader.iter_events())
    slo = stepstats.parse_slo(config.get("slo"))
    steps = ReportSteps(events, slo, levels)
    legacy = None if steps.has_steps else LegacySteps(step_events(events), slo, origin_s)
    timeline, totals = _read_records(reader, steps, legacy, origin_s, on_columns)
    scrapes = _Scrapes(reader, origin_s, steps)
    server_cfg = server_config(scrapes)
    step_list = legacy.finish() if legacy is not None else steps.entries(origin_s)
    series = ServerSeries(scrapes.points)
    _add_server_windows(step_list, series)
    knee, slo_max = stepstats.knee_and_slo_limit(step_list) if step_list else (None, None)
    gpu_lines, gpu_section = gpu.attach(step_list, scrapes.gpus)
    session = _session(session_dir, reader, totals, events)
    workload, server_timeline = _workload(events), thin(series.points)
    marks = _marks(events, origin_s)
    per_request = steps.per_request.section(_server_ttft_s(step_list))
    detail_lines, detail_part = server_detail.attach(step_list, scrapes.detail)
    doc: ReportDoc = {
        "schema": SCHEMA,
        "session": session,
        "target": _target(config, events, reader),
        "workload": workload,
        "config": config,
        "server": server_cfg,
        "memory_budget": memory_budget(
            server_cfg, _or_zero(totals.mean_prompt()), _or_zero(totals.mean_output())
        ),
        "steps": step_list,
        "knee": knee,
        "slo_max_concurrency": slo_max,
        "timeline": timeline.series(),
        "server_timeline": server_timeline,
        "events": marks,
        "quality": cast(QualityInfo | None, reader.quality),  # ``infmon quality``'s document
        "diagnosis": diagnosis.lines(knee, slo is not None, step_list)
        + gpu_lines
        + detail_lines
        + perreq.diagnosis_lines(per_request),
        **gpu_section,
        **per_request,
        **detail_part,
        "caveats": diagnosis.caveats(session, workload, server_timeline, marks),
    }
    return doc, steps


def _or_zero(x: float) -> float:
    return 0.0 if math.isnan(x) else x


def _server_ttft_s(steps: list[StepEntry]) -> dict[int, float]:
    """Each step's server TTFT histogram mean, from its server evidence (where it has one)."""
    out = {}
    for st in steps:
        ev = ServerEvidence.from_dict(st.get("server_evidence"))
        if ev is not None and math.isfinite(ev.server_ttft_s):
            out[st["step"]] = ev.server_ttft_s
    return out


def _add_server_windows(steps: list[StepEntry], series: ServerSeries) -> None:
    """Each step's ``server``: the server timeline's figures over its time."""
    for entry in steps:
        end = entry["end_s"]
        entry["server"] = series.window(entry["start_s"], math.inf if end is None else end)
