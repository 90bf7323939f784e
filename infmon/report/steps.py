"""A session's steps for its report: the journal's step events replayed into the same
``StepLedger`` the live session used, fed the same records and scrapes, so the report's steps,
throughputs and knee are the ones the screen showed once every step settled."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from infmon.journal.events import StepPartial
from infmon.model.records.columns import RecordColumns
from infmon.model.records.figures import figures_of_columns
from infmon.model.records.measures import SLO
from infmon.model.records.request import RequestRecord
from infmon.model.steps.evidence import ServerEvidence, ServerSample
from infmon.model.steps.gathering import ClientCheck
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import CLOSED, EVENT_KINDS, RATE, StepEvent
from infmon.model.steps.step_levels import LevelSample
from infmon.report.doc import JournalLine, ReportDoc, StepEntry
from infmon.report.perreq import PerRequestReport


def step_events(events: Iterable[JournalLine]) -> list[tuple[StepEvent, JournalLine]]:
    """The journal's step events, in order, with their raw lines (for the recorded checks)."""
    out = []
    for e in events:
        kind = EVENT_KINDS.get(str(e.get("kind")))
        if kind is not None and (ev := StepEvent.from_payload(kind, e)) is not None:
            out.append((ev, e))
    return out


class ReportSteps:
    """Build the ledger from the events first, then stream records and scrapes into it
    (``levels``: the ledger keeps every step's level for a comparison of runs, too)."""

    def __init__(
        self, events: Iterable[JournalLine], slo: SLO | None, levels: bool = False
    ) -> None:
        self.ledger = StepLedger(slo)
        if levels:
            self.ledger.keep_levels()
        self.per_request = PerRequestReport()
        """The server's per-request view of the same measured requests (``doc["per_request"]``)."""
        self.has_steps = False
        self._last_s = -math.inf
        events = list(events)
        self.partial = {p.index for e in events if (p := StepPartial.from_payload(e)) is not None}
        """Steps a stop cut short (bench's ``step_partial``): ended, but not full steps."""
        for ev, raw in step_events(events):
            self.has_steps |= ev.kind == "begin"  # old sessions have step_end events only
            self.ledger.apply([ev])
            if ev.kind == "end" and isinstance(raw.get("stats"), dict):
                self.ledger.set_check(ev.index, ClientCheck.from_payload(raw["stats"]))

    def add_scrapes(self, scrapes: Iterable[JournalLine]) -> None:
        for s in scrapes:
            t, snap = s.get("t"), s.get("snap")
            if isinstance(t, (int, float)) and isinstance(snap, Mapping):
                sample = ServerSample.from_dict(float(t), snap)
                self.ledger.add_scrape(float(t), sample, snap.get("spec_decode"))

    def add(self, rec: RequestRecord) -> None:
        """One record (``add_columns`` does a whole step at once)."""
        self.ledger.add_record(rec)
        end = rec.end_s if not math.isnan(rec.end_s) else rec.sent_s
        self._last_s = max(self._last_s, end)

    def add_columns(self, index: int, cols: RecordColumns) -> None:
        """Every record of step ``index`` (a journal gives them a step at a time): their
        tokens are credited to the steps their chunks fell in, and the step's figures are
        computed exactly, from the records sent in its measured time, as ``add_record`` would
        classify them one by one."""
        if not len(cols):
            return
        self.ledger.credit_columns(cols)
        ends = np.where(np.isnan(cols.end_s), cols.sent_s, cols.end_s)
        self._last_s = max(self._last_s, float(ends.max()))
        span = self.ledger.book.get(index)
        if span is None:
            return
        measured = span.measures_many(cols.sent_s)
        self.ledger.add_measured_columns(index, cols, measured)
        taken = cols.take(measured)
        fig = figures_of_columns(taken, self.ledger.slo)
        self.per_request.add(index, taken)
        outside = int((~measured).sum())
        self.ledger.set_figures(index, replace(fig, warmup_excluded=fig.warmup_excluded + outside))

    def end(self) -> int | None:
        """End the step the session never ended (a killed run) at its last record; its index."""
        cur = self.ledger.book.current
        if cur is None:
            return None
        self.ledger.apply(self.ledger.book.end(max(self._last_s, cur.start_s)))
        return cur.index

    def levels(self, doc: ReportDoc) -> tuple[LevelSample, ...]:
        """The closed-loop and rate steps with measured requests as a comparison reads them
        (levels kept: ``ReportSteps(levels=True)``), with the report's server evidence and
        its client-late flags; after ``entries``."""
        if self.ledger.levels is None:
            return ()
        steps = doc.get("steps") or []
        evidence = {
            i: ServerEvidence.from_dict(s.get("server_evidence"))
            for s in steps
            if isinstance(i := s.get("step"), int)
        }
        late = {s.get("step") for s in steps if s.get("client_late") is True}
        out = []
        for sample in self.ledger.levels.samples(self._last_s, evidence, metered=False):
            if sample.level.mode in (CLOSED, RATE):
                out.append(replace(sample, client_late=sample.step in late))
        return tuple(out)

    def entries(self, origin_s: float) -> list[StepEntry]:
        """Every step as a ``steps[]`` entry of ``bench --json`` (plus where it sat in time).
        A step the session never ended (a killed run) ends at its last record, marked
        incomplete, as is a step a stop cut short (``step_partial``); a step that measured
        nothing at all (paused at once) is left out."""
        ended = self.end()
        unfinished = {ended} if ended is not None else set()
        self.ledger.settle()
        out = []
        for r in self.ledger.settled_results():
            s = r.stats
            if s.duration_s <= 0 and not (s.completed or s.failed or s.cancelled):
                continue
            partial = r.index in unfinished or r.index in self.partial
            d: StepEntry = {**r.to_dict(origin_s), "complete": not partial}
            out.append(d)
        return out
