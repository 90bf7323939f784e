"""Session directory → the report document (the content of ``report.json``), in one pass.

Records stream from the journal once: each goes to ``requests.csv`` and the over-time bins
as it is read, and into its step's buffer; a step is summarised (by the bench's own
``summarize``) and dropped as soon as records two steps later arrive, so memory follows
the largest step, not the session.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infmon.journal.reader import SessionReader
from infmon.model.records import RequestRecord
from infmon.report import diagnosis, stepstats
from infmon.report.server import ServerSeries, memory_budget, server_config
from infmon.report.steps import ReportSteps
from infmon.report.timeline import ClientTimeline, server_point, thin

SCHEMA = "infmon.report/1"
MARK_KINDS = (
    "mark",
    "baseline",
    "concurrency",
    "rate",
    "step_start",
    "step_end",
    "error",
    "server_down",
    "server_up",
    "restart",
    "pause",
    "resume",
    "quality",
)


class _Totals:
    def __init__(self) -> None:
        self.requests = self.failed = self.cancelled = self.warmup = self.estimated = 0
        self.prompt_sum = self.prompt_n = self.output_sum = self.output_n = 0
        self.first_sent_s = math.inf
        self.last_end_s = -math.inf

    def add(self, r: RequestRecord) -> None:
        self.requests += 1
        if r.error_kind == "cancelled":
            self.cancelled += 1
        else:
            self.failed += not r.ok
        self.warmup += r.warmup
        self.first_sent_s = min(self.first_sent_s, r.sent_s)
        end = r.end_s if not math.isnan(r.end_s) else r.sent_s
        self.last_end_s = max(self.last_end_s, end)
        if r.prompt_tokens is not None:
            self.prompt_sum += r.prompt_tokens
            self.prompt_n += 1
        if r.ok:
            self.estimated += r.tokens_estimated
            self.output_sum += r.output_token_count
            self.output_n += 1


def _marks(events: list[dict[str, Any]], origin_s: float) -> list[dict[str, Any]]:
    """Operator actions and notable events, with session-relative times (last 500)."""
    out = []
    for e in events:
        if e.get("kind") in MARK_KINDS and isinstance(e.get("t"), (int, float)):
            item = {k: v for k, v in e.items() if k != "stats"}
            item["t_s"] = e["t"] - origin_s
            out.append(item)
    return out[-500:]


def _target(config: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """URL, model and endpoint: the resolved ones (``target`` event) over the configured ones."""
    out = {k: config.get(k) for k in ("url", "model", "endpoint")}
    for e in events:
        if e.get("kind") == "target":
            out.update({k: e[k] for k in out if e.get(k) is not None})
    return out


def _workload(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What was sent (``workload`` event): kind, sizing, seed, lengths, prefixes, trace."""
    for e in events:
        if e.get("kind") == "workload":
            return {k: v for k, v in e.items() if k not in ("kind", "t")}
    return {}


def build_summary(
    session_dir: Path, on_record: Callable[[RequestRecord], None] | None = None
) -> dict[str, Any]:
    """The report document of a session; ``on_record`` sees every record once (for CSV)."""
    reader = SessionReader(Path(session_dir))
    meta, config = reader.meta, reader.config
    origin_s = reader.origin_s()
    events = list(reader.iter_events())
    steps = ReportSteps(events, stepstats.parse_slo(config.get("slo")))
    steps.add_scrapes(reader.iter_scrapes())
    timeline, totals = ClientTimeline(origin_s), _Totals()
    for r in reader.iter_records():
        totals.add(r)
        timeline.add(r)
        steps.add(r)
        if on_record is not None:
            on_record(r)
    step_list = steps.entries(origin_s)
    points = [p for s in reader.iter_scrapes() if (p := server_point(s, origin_s))]
    series = ServerSeries(points)
    for entry in step_list:
        entry["server"] = series.window(entry["start_s"], entry["end_s"])
    knee, slo_max = stepstats.knee_and_slo_limit(step_list) if step_list else (None, None)
    server_cfg = server_config(reader.iter_scrapes())
    mean_prompt = totals.prompt_sum / totals.prompt_n if totals.prompt_n else math.nan
    mean_output = totals.output_sum / totals.output_n if totals.output_n else math.nan
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "session": {
            "dir": Path(session_dir).name,
            "started_wall_s": (meta.get("clock_origin") or {}).get("wall_s"),
            "label": config.get("label"),
            "requests": totals.requests,
            "failed": totals.failed,
            "cancelled": totals.cancelled,
            "warmup_excluded": totals.warmup,
            "tokens_estimated": totals.estimated,
            "mean_prompt_tokens": None if math.isnan(mean_prompt) else mean_prompt,
            "mean_output_tokens": None if math.isnan(mean_output) else mean_output,
            "skipped_lines": reader.skipped[0],
            "ended_cleanly": any(e.get("kind") == "session_end" for e in events),
        },
        "target": _target(config, events),
        "workload": _workload(events),
        "config": config,
        "server": server_cfg,
        "memory_budget": memory_budget(
            server_cfg,
            0.0 if math.isnan(mean_prompt) else mean_prompt,
            0.0 if math.isnan(mean_output) else mean_output,
        ),
        "steps": step_list,
        "knee": knee,
        "slo_max_concurrency": slo_max,
        "timeline": timeline.series(),
        "server_timeline": thin(series.points),
        "events": _marks(events, origin_s),
        "quality": reader.quality,
    }
    doc["diagnosis"] = diagnosis.lines(doc)
    doc["caveats"] = diagnosis.caveats(doc)
    return doc
