"""A step still gathering, as the ``StepLedger`` holds it until the step settles: its tally,
the tokens credited to it, the server's scrapes, the load's windows (in-flight area, loop lag,
send lateness, the load threads' scheduling) and the client's check over it (``ClientCheck``,
recorded in the step's journal ``step_end`` event).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any, TypedDict

from infmon.model.base.loghist import LogHistogram
from infmon.model.records.client_late import NO_CAUSE, LateCause, ThreadTime, late_cause
from infmon.model.records.figures import StepFigures
from infmon.model.records.request import RequestRecord
from infmon.model.steps.evidence import ServerSample
from infmon.model.steps.tally import StepTally

NAN = math.nan


class ClientCheckPayload(TypedDict):
    """``ClientCheck.payload()``: a step's client check in its journal ``step_end`` event."""

    achieved_concurrency: float | None
    loop_lag_p99_ms: float | None
    send_lateness_p99_ms: float | None
    late_cause: str
    late_starved: bool
    late_bound: str


@dataclass(frozen=True, slots=True)
class ClientCheck:
    """The load client's own measurements over a step (recorded when it ends)."""

    achieved_concurrency: float = NAN
    loop_lag_p99_s: float = NAN
    send_lateness_p99_s: float = NAN
    """How late trace/schedule arrivals were sent, p99 (nan: not a replay)."""
    late_cause: LateCause = NO_CAUSE
    """Why the timestamps were late, when they were (``infmon.model.records.client_late``)."""

    def payload(self) -> ClientCheckPayload:
        def j(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6)

        return {
            "achieved_concurrency": j(self.achieved_concurrency),
            "loop_lag_p99_ms": j(self.loop_lag_p99_s * 1e3),
            "send_lateness_p99_ms": j(self.send_lateness_p99_s * 1e3),
            "late_cause": self.late_cause.text,
            "late_starved": self.late_cause.starved,
            "late_bound": self.late_cause.bound,
        }

    @classmethod
    def from_payload(cls, d: Any) -> ClientCheck:
        if not isinstance(d, dict):
            return cls()
        ach, lag, late = (d.get(k) for k in
                          ("achieved_concurrency", "loop_lag_p99_ms", "send_lateness_p99_ms"))  # fmt: skip
        return cls(
            float(ach) if isinstance(ach, (int, float)) else NAN,
            float(lag) / 1e3 if isinstance(lag, (int, float)) else NAN,
            float(late) / 1e3 if isinstance(late, (int, float)) else NAN,
            LateCause(
                d.get("late_starved") is True,
                str(d.get("late_cause") or ""),
                bound if isinstance(bound := d.get("late_bound"), str) else "",
            ),
        )


@dataclass(slots=True)
class Sched:
    """The load threads' CPU time and run-queue wait over the windows a step measured, and the
    host's top CPU users in the window where the wait was worst."""

    time: ThreadTime = field(default_factory=ThreadTime)
    users: str | None = None
    worst: float = 0.0

    def add(self, span_s: float, cpu_s: float, runq_s: float, runs: int, users: str | None) -> None:
        self.time.add(span_s, cpu_s, runq_s, runs)
        if users and runq_s / span_s >= self.worst:
            self.users, self.worst = users, runq_s / span_s

    def cause(self) -> LateCause:
        if self.time.span_s <= 0:
            return NO_CAUSE
        return late_cause(self.time.starving, self.time.busy_share, self.users)


@dataclass(slots=True)
class OpenStep:
    """A step still gathering: its tally, credited tokens, scrapes and the load's windows."""

    tally: StepTally
    tokens: float = 0.0
    prompt_tokens: float = 0.0
    samples: list[ServerSample] = field(default_factory=list)
    check: ClientCheck | None = None
    """As recorded when the step ended (a report); else measured from the windows."""
    live_tokens: float = 0.0
    """Tokens as their chunks arrived (the load's windows): the figure of a step not settled."""
    metered: bool = False
    area_s: float = 0.0
    covered_s: dict[int, float] = field(default_factory=dict)
    """Measured time each worker's windows covered (the workers' windows overlap in time)."""
    lag: LogHistogram = field(default_factory=LogHistogram)
    lateness: LogHistogram = field(default_factory=LogHistogram)
    sched: Sched = field(default_factory=lambda: Sched())
    sent: int = 0
    figures: StepFigures | None = None
    """Exact figures computed from the step's records at once (a report), over the tally's."""

    def client_check(self) -> ClientCheck:
        if self.check is not None:
            return self.check
        covered = max(self.covered_s.values(), default=0.0)
        achieved = self.area_s / covered if covered > 0 else NAN
        late = self.lateness.quantile(0.99) if self.lateness.count else NAN
        lag = self.lag.quantile(0.99) if self.lag.count else NAN
        return ClientCheck(achieved, lag, late, self.sched.cause())


def tokens_per_chunk(rec: RequestRecord) -> float:
    """A finished request's output tokens spread evenly over its chunks (a failed one: a
    token a chunk, as far as it got); the journal's columns give the same figure."""
    return rec.output_token_count / len(rec.chunk_times_s) if rec.ok else 1.0


def chunks_between(times: tuple[float, ...], lo: float, hi: float, per_chunk: float) -> float:
    return (bisect_left(times, hi) - bisect_left(times, lo)) * per_chunk
