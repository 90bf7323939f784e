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
        self.requests = self.failed = self.warmup = self.estimated = 0
        self.prompt_sum = self.prompt_n = self.output_sum = self.output_n = 0
        self.first_sent_s = math.inf
        self.last_end_s = -math.inf

    def add(self, r: RequestRecord) -> None:
        self.requests += 1
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


def _step_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finished steps in order: ``step`` events (bench) or ``step_end`` events, with stats."""
    return [e for e in events if e.get("kind") in ("step", "step_end")]


def _duration_s(records: list[RequestRecord], ev: dict[str, Any]) -> float:
    """The step's measured duration: as recorded when it ended, else from its records."""
    for src in (ev.get("stats") or {}, ev):
        if isinstance(src.get("duration_s"), (int, float)):
            return float(src["duration_s"])
    measured = [r for r in records if not r.warmup] or records
    ends = [r.end_s for r in measured if not math.isnan(r.end_s)]
    last = max(ends) if ends else max(r.sent_s for r in measured)
    return max(last - min(r.sent_s for r in measured), 1e-9)


def _label(records: list[RequestRecord], key: str) -> Any:
    values = [getattr(r, key) for r in records if getattr(r, key) is not None]
    return max(set(values), key=values.count) if values else None


class _Steps:
    """Buffers records per step and summarises each once it is complete."""

    def __init__(self, step_events: list[dict[str, Any]], slo: Any, origin_s: float) -> None:
        self.step_events, self.slo, self.origin_s = step_events, slo, origin_s
        self.ends_by_index = {
            e["index"]: e
            for e in step_events
            if e.get("kind") == "step_end" and isinstance(e.get("index"), int)
        }
        """``step_end`` events carry the records' own step index (the monitor may leave a step
        with no records, so counting would pair a step with its neighbour's end)."""
        self.order: list[int] = []
        self.open: dict[int, list[RequestRecord]] = {}
        self.done: dict[int, dict[str, Any]] = {}

    def add(self, r: RequestRecord) -> None:
        if r.step not in self.open:
            if r.step in self.done:
                return
            self.order.append(r.step)
            self.open[r.step] = []
        self.open[r.step].append(r)
        for idx in [i for i in self.open if i <= r.step - 2]:
            self._close(idx)

    def finish(self) -> list[dict[str, Any]]:
        for idx in list(self.open):
            self._close(idx)
        return [self.done[i] for i in sorted(self.done)]

    def _close(self, idx: int) -> None:
        records = self.open.pop(idx)
        ev = self._event_of(idx)
        recorded = dict(ev.get("stats") or {})
        for key in ("concurrency", "rate"):
            if recorded.get(key) is None and ev.get(key) is not None:
                recorded[key] = ev[key]
            if recorded.get(key) is None:
                recorded[key] = _label(records, key)
        entry = stepstats.step_entry(records, _duration_s(records, ev), self.slo, recorded)
        entry["step"] = idx
        entry["start_s"] = min(r.sent_s for r in records) - self.origin_s
        entry["end_s"] = (
            max(
                (r.end_s for r in records if not math.isnan(r.end_s)),
                default=entry["start_s"] + self.origin_s,
            )
            - self.origin_s
        )
        entry["complete"] = bool(ev)
        self.done[idx] = entry

    def _event_of(self, idx: int) -> dict[str, Any]:
        """The step's end event: by its index, else (bench ``step`` events count from 0) by order."""
        if self.ends_by_index:
            return self.ends_by_index.get(idx, {})
        ordinal = self.order.index(idx)
        return self.step_events[ordinal] if ordinal < len(self.step_events) else {}


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
    steps = _Steps(_step_events(events), stepstats.parse_slo(config.get("slo")), origin_s)
    timeline, totals = ClientTimeline(origin_s), _Totals()
    for r in reader.iter_records():
        totals.add(r)
        timeline.add(r)
        steps.add(r)
        if on_record is not None:
            on_record(r)
    step_list = steps.finish()
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
