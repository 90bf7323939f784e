"""Session directory → the report document (the content of ``report.json``), in one pass.

Records come from the journal one step at a time, as columns (``RecordColumns``: the journal's
step index, or for old JSON-lines sessions a stream grouped by ``record.step``); each step goes
to ``requests.csv`` and the over-time bins, and is summarised by the bench's own statistics
(``summarize_columns``: ``summarize``'s figures, vectorised) and dropped, so memory follows the
largest step, not the session.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from infmon.journal.reader import SessionReader
from infmon.model.columns import MISSING, RecordColumns
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

    def add(self, c: RecordColumns) -> None:
        if not len(c):
            return
        ok = c.ok
        self.requests += len(c)
        self.failed += int((~ok).sum())
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


def _step_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finished steps in order: ``step`` events (bench) or ``step_end`` events, with stats."""
    return [e for e in events if e.get("kind") in ("step", "step_end")]


def _duration_s(records: RecordColumns, ev: dict[str, Any]) -> float:
    """The step's measured duration: as recorded when it ended, else from its records."""
    for src in (ev.get("stats") or {}, ev):
        if isinstance(src.get("duration_s"), (int, float)):
            return float(src["duration_s"])
    measured = records.take(~records.warmup) if (~records.warmup).any() else records
    ends = measured.end_s[~np.isnan(measured.end_s)]
    last = float(ends.max()) if ends.size else float(measured.sent_s.max())
    return max(last - float(measured.sent_s.min()), 1e-9)


def _label(records: RecordColumns, key: str) -> Any:
    """The most common load level among the step's records (the smallest on a tie)."""
    values = records.concurrency if key == "concurrency" else records.rate
    known = values[values != MISSING] if key == "concurrency" else values[~np.isnan(values)]
    if not known.size:
        return None
    levels, counts = np.unique(known, return_counts=True)
    best = levels[int(np.argmax(counts))]
    return int(best) if key == "concurrency" else float(best)


class _Steps:
    """Summarises each step's records (grouped by ``record.step``) against the step events."""

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
        self.done: dict[int, dict[str, Any]] = {}

    def add(self, idx: int, records: RecordColumns) -> None:
        """One step's records, complete."""
        if idx in self.done or not len(records):
            return
        self.order.append(idx)
        self._close(idx, records)

    def finish(self) -> list[dict[str, Any]]:
        return [self.done[i] for i in sorted(self.done)]

    def _close(self, idx: int, records: RecordColumns) -> None:
        ev = self._event_of(idx)
        recorded = dict(ev.get("stats") or {})
        for key in ("concurrency", "rate"):
            if recorded.get(key) is None and ev.get(key) is not None:
                recorded[key] = ev[key]
            if recorded.get(key) is None:
                recorded[key] = _label(records, key)
        entry = stepstats.step_entry(records, _duration_s(records, ev), self.slo, recorded)
        entry["step"] = idx
        entry["start_s"] = float(records.sent_s.min()) - self.origin_s
        ends = records.end_s[~np.isnan(records.end_s)]
        entry["end_s"] = (
            float(ends.max()) if ends.size else entry["start_s"] + self.origin_s
        ) - self.origin_s
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


def build_summary(
    session_dir: Path, on_columns: Callable[[RecordColumns], None] | None = None
) -> dict[str, Any]:
    """The report document of a session; ``on_columns`` sees every step's records once (CSV)."""
    reader = SessionReader(Path(session_dir))
    meta, config = reader.meta, reader.config
    origin_s = reader.origin_s()
    events = list(reader.iter_events())
    steps = _Steps(_step_events(events), stepstats.parse_slo(config.get("slo")), origin_s)
    timeline, totals = ClientTimeline(origin_s), _Totals()
    for idx, records in reader.iter_step_columns():
        totals.add(records)
        timeline.add(records)
        steps.add(idx, records)
        if on_columns is not None:
            on_columns(records)
    step_list = steps.finish()
    points: list[dict[str, Any]] = []

    def scrapes() -> Iterator[dict[str, Any]]:  # one pass over the scrapes for both uses
        for s in reader.iter_scrapes():
            if p := server_point(s, origin_s):
                points.append(p)
            yield s

    server_cfg = server_config(scrapes())
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
            "warmup_excluded": totals.warmup,
            "tokens_estimated": totals.estimated,
            "mean_prompt_tokens": None if math.isnan(mean_prompt) else mean_prompt,
            "mean_output_tokens": None if math.isnan(mean_output) else mean_output,
            "skipped_lines": reader.skipped[0],
            "ended_cleanly": any(e.get("kind") == "session_end" for e in events),
        },
        "target": _target(config, events),
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
