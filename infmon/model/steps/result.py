"""One step's result: the step (its span in the session), its figures, the server's evidence
over it, and whether the knee may read it; ``to_dict`` is the step as the report and
``bench --json`` write it. The ledger (``infmon.model.steps.ledger``) makes these; the bench
table, the panes and the reports read them."""

from __future__ import annotations

import math
from dataclasses import dataclass

from infmon.model.records.stats import StepStats, StepStatsEntry
from infmon.model.steps.evidence import ServerEvidence, ServerEvidenceInfo
from infmon.model.steps.knee import KneePoint
from infmon.model.steps.span import StepSpan

NAN = math.nan


class StepResultEntry(StepStatsEntry, total=False):
    """``StepResult.to_dict()``: the step's figures and where it sat in the session (times in
    seconds from ``origin_s``); ``transition`` only on a step never clean, ``queued`` only on
    one not eligible whose every scrape saw the server's batch full (``StepResult.queued``)."""

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
    transition: bool
    queued: bool


@dataclass(frozen=True, slots=True)
class StepResult:
    """One step with its statistics: a row of the bench table, the knee pane and the report."""

    span: StepSpan
    stats: StepStats
    evidence: ServerEvidence | None
    eligible: bool
    settled: bool
    queued: bool = False
    """Not eligible, and every scrape of it saw the server's batch full
    (``knee.queued_throughout``): the knee rule reads its server evidence alone."""

    @property
    def index(self) -> int:
        return self.span.index

    @property
    def knee_point(self) -> KneePoint | None:
        """What the knee rule reads of this step (None: not a closed-loop step it may judge)."""
        c = self.span.level.concurrency
        ev = self.evidence
        if c is not None and self.queued and ev is not None:
            return KneePoint.of_queue(float(c), ev.running_p50, ev.waiting_p50, ev.kv_usage_max)
        if c is None or not self.eligible:
            return None
        s = self.stats
        return KneePoint(
            float(c),
            s.output_throughput_tok_s,
            s.e2el.p50 * 1e3,
            s.slo_attainment,
            ev.running_p50 if ev else NAN,
            ev.waiting_p50 if ev else NAN,
            ev.kv_usage_max if ev else NAN,
            ev.preemptions if ev else NAN,
            ev.api_server_cpu_cores if ev else NAN,
        )

    @property
    def transition(self) -> bool:
        """Ended before its load was ever clean: measured nothing (``StepSpan.transition``)."""
        return self.span.transition

    def to_dict(self, origin_s: float = 0.0) -> StepResultEntry:
        end = self.span.end_s
        d: StepResultEntry = {
            **self.stats.to_dict(),
            "step": self.span.index,
            "level": self.span.level.label,
            "origin": self.span.origin,
            "revisit_of": self.span.revisit_of,
            "start_s": round(self.span.start_s - origin_s, 6),
            "end_s": None if end is None else round(end - origin_s, 6),
            "measured_s": round(self.stats.duration_s, 6),
            "eligible": self.eligible,
            "settled": self.settled,
            "server_evidence": self.evidence.to_dict() if self.evidence else None,
        }
        if self.transition:
            d["transition"] = True
        if self.queued:
            d["queued"] = True
        return d
