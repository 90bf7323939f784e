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
from typing import Any

import numpy as np

from infmon.journal.reader import SessionReader
from infmon.model.columns import MISSING, RecordColumns
from infmon.model.gpu_steps import GpuTimeline
from infmon.report import diagnosis, gpu, stepstats
from infmon.report.legacy_steps import LegacySteps, step_events
from infmon.report.server import ServerSeries, memory_budget, server_config
from infmon.report.steps import ReportSteps
from infmon.report.timeline import ClientTimeline, server_point, thin

SCHEMA = "infmon.report/1"
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


def _marks(events: list[dict[str, Any]], origin_s: float) -> list[dict[str, Any]]:
    """Operator actions and notable events, with session-relative times (last 500)."""
    out = []
    for e in events:
        if e.get("kind") in MARK_KINDS and isinstance(e.get("t"), (int, float)):
            item = {k: v for k, v in e.items() if k != "stats"}
            item["t_s"] = e["t"] - origin_s
            out.append(item)
    return out[-500:]


def _target(
    config: dict[str, Any], events: list[dict[str, Any]], reader: SessionReader | None = None
) -> dict[str, Any]:
    """URL, model and endpoint: the resolved ones (``target`` event) over the configured ones;
    with several endpoints, ``url`` names them all and ``endpoints`` counts each one's requests."""
    out = {k: config.get(k) for k in ("url", "model", "endpoint")}
    urls: list[Any] = []
    for e in events:
        if e.get("kind") == "target":
            out.update({k: e[k] for k in out if e.get(k) is not None})
            urls = e.get("urls") or urls
    if len(urls) > 1:
        counts = reader.endpoint_counts() if reader is not None else {}
        out["url"] = ", ".join(map(str, urls))
        out["endpoints"] = [
            {"url": u, "requests": counts.get(i, (0, 0))[0], "failed": counts.get(i, (0, 0))[1]}
            for i, u in enumerate(urls)
        ]
    return out


def _workload(events: list[dict[str, Any]]) -> dict[str, Any]:
    """What was sent (``workload`` event): kind, sizing, seed, lengths, prefixes, trace."""
    for e in events:
        if e.get("kind") == "workload":
            return {k: v for k, v in e.items() if k not in ("kind", "t")}
    return {}


def build_summary(
    session_dir: Path, on_columns: Callable[[RecordColumns], None] | None = None
) -> dict[str, Any]:
    """The report document of a session; ``on_columns`` sees every step's records once (CSV)."""
    reader = SessionReader(Path(session_dir))
    meta, config = reader.meta, reader.config
    origin_s = reader.origin_s()
    events = list(reader.iter_events())
    slo = stepstats.parse_slo(config.get("slo"))
    steps = ReportSteps(events, slo)
    legacy = None if steps.has_steps else LegacySteps(step_events(events), slo, origin_s)
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
    points: list[dict[str, Any]] = []
    gpus = GpuTimeline(origin_s)

    def scrapes() -> Iterator[dict[str, Any]]:  # one pass over the scrapes for all uses
        for s in reader.iter_scrapes():
            if p := server_point(s, origin_s):
                points.append(p)
            steps.add_scrapes((s,))
            gpus.add_scrape(s)
            yield s

    server_cfg = server_config(scrapes())
    step_list = legacy.finish() if legacy is not None else steps.entries(origin_s)
    series = ServerSeries(points)
    for entry in step_list:
        entry["server"] = series.window(entry["start_s"], entry["end_s"])
    knee, slo_max = stepstats.knee_and_slo_limit(step_list) if step_list else (None, None)
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
        "target": _target(config, events, reader),
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
    gpu.attach(doc, gpus)
    doc["caveats"] = diagnosis.caveats(doc)
    return doc
