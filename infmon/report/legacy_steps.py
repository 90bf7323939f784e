"""Steps of a session recorded before the step model (no ``step_begin`` events): records
grouped by their step tag and summarised against the old ``step``/``step_end`` events, as
infmon reported them then (``tests/fixtures/sessions/jsonl-v1`` holds such a session)."""

from __future__ import annotations

import numpy as np

from infmon.model.records.columns import MISSING, RecordColumns
from infmon.model.records.measures import SLO
from infmon.report import stepstats
from infmon.report.doc import JournalLine as Event
from infmon.report.doc import StepEntry


def step_events(events: list[Event]) -> list[Event]:
    """Finished steps in order: ``step`` events (bench) or ``step_end`` events, with stats."""
    return [e for e in events if e.get("kind") in ("step", "step_end")]


def _duration_s(records: RecordColumns, ev: Event) -> float:
    """The step's measured duration: as recorded when it ended, else from its records."""
    for src in (ev.get("stats") or {}, ev):
        if isinstance(src.get("duration_s"), (int, float)):
            return float(src["duration_s"])
    measured = records.take(~records.warmup) if (~records.warmup).any() else records
    ends = measured.end_s[~np.isnan(measured.end_s)]
    last = float(ends.max()) if ends.size else float(measured.sent_s.max())
    return max(last - float(measured.sent_s.min()), 1e-9)


def _label(records: RecordColumns, key: str) -> int | float | None:
    """The most common load level among the step's records (the smallest on a tie)."""
    values = records.concurrency if key == "concurrency" else records.rate
    known = values[values != MISSING] if key == "concurrency" else values[~np.isnan(values)]
    if not known.size:
        return None
    levels, counts = np.unique(known, return_counts=True)
    best = levels[int(np.argmax(counts))]
    return int(best) if key == "concurrency" else float(best)


class LegacySteps:
    """Summarises each step's records (grouped by ``record.step``) against the step events."""

    def __init__(self, step_events: list[Event], slo: SLO | None, origin_s: float) -> None:
        self.step_events, self.slo, self.origin_s = step_events, slo, origin_s
        self.ends_by_index = {
            e["index"]: e
            for e in step_events
            if e.get("kind") == "step_end" and isinstance(e.get("index"), int)
        }
        """``step_end`` events carry the records' own step index (the monitor may leave a step
        with no records, so counting would pair a step with its neighbour's end)."""
        self.order: list[int] = []
        self.done: dict[int, StepEntry] = {}

    def add(self, idx: int, records: RecordColumns) -> None:
        """One step's records, complete."""
        if idx in self.done or not len(records):
            return
        self.order.append(idx)
        self._close(idx, records)

    def finish(self) -> list[StepEntry]:
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

    def _event_of(self, idx: int) -> Event:
        """The step's end event: by its index, else (bench ``step`` events count from 0) by order."""
        if self.ends_by_index:
            return self.ends_by_index.get(idx, {})
        ordinal = self.order.index(idx)
        return self.step_events[ordinal] if ordinal < len(self.step_events) else {}
