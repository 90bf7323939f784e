"""Steps with their figures: the step book, each step's tally, tokens and server evidence.

One ledger serves the live session (fed as things happen) and reports (fed by replaying the
journal: step events, records, scrapes), so both compute the same steps, throughputs, server
evidence and knee. A step's throughput counts the output tokens whose chunks arrived inside
its measured time, so it matches the server's generation counter over the same window; its
measured time starts clean (``infmon.model.steps.book.starts_clean``: the ledger watches what is in
flight and says when), so those tokens are its own level's. A step that never started clean
is a transition: shown, never in the knee. A step is *settled* once every request that could add to it has finished;
its result is then computed once and kept, and its per-request figures are let go.

The ledger is the one router of what happens to the steps: a record, a load window, a report's
chunk columns and a scrape each go to their step here once, for the step's own figures (an
open step's ``OpenStep``: ``infmon.model.steps.gathering``) and, when kept, for its level as a
comparison of runs reads it (``keep_levels``: ``infmon.model.steps.step_levels``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from infmon.model.base.loghist import LogHistogram
from infmon.model.records.columns import US, RecordColumns
from infmon.model.records.figures import StepFigures
from infmon.model.records.measures import SLO
from infmon.model.records.request import RequestRecord
from infmon.model.records.stats import assemble
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.book import StepBook
from infmon.model.steps.evidence import (
    ServerSample,
    evidence_of,
)
from infmon.model.steps.gathering import (
    ClientCheck,
    OpenStep,
    chunks_between,
    tokens_per_chunk,
)
from infmon.model.steps.knee import (
    Knee,
    KneePoint,
    find_knee,
    queued_throughout,
    slo_max_concurrency,
)
from infmon.model.steps.result import StepResult
from infmon.model.steps.span import StepEvent, StepSpan
from infmon.model.steps.step_levels import SpecCounters, StepLevels, spec_counters
from infmon.model.steps.tally import StepTally

MIN_HOLD_S = 5.0
MIN_REQUESTS = 20
"""A step shorter than ``MIN_HOLD_S`` of measured time or that held fewer requests than
``MIN_REQUESTS`` (sent in its measured time: finished, failed or cancelled at a quit) is shown
but never feeds the knee (its figures are noise)."""
MAX_SAMPLES = 20_000


class StepLedger:
    """See the module docstring. Pure: time comes from the caller."""

    def __init__(
        self,
        slo: SLO | None = None,
        *,
        coalesce_s: float = 1.0,
        min_hold_s: float = MIN_HOLD_S,
        min_requests: int = MIN_REQUESTS,
        exact_limit: int | None = None,
    ) -> None:
        self.slo = slo
        self.book = StepBook(coalesce_s)
        self.min_hold_s, self.min_requests = min_hold_s, min_requests
        self.exact_limit = exact_limit
        """Measured requests a step keeps exact latencies for (``StepTally``; None: all)."""
        self._open: dict[int, OpenStep] = {}
        self._settled: dict[int, StepResult] = {}
        self._inflight: dict[int, dict[int, int]] = {}
        """Each worker's requests in flight per step tag, as its last window said."""
        self.levels: StepLevels | None = None
        """Each step's figures as the comparison of runs reads them (``keep_levels``)."""

    def keep_levels(self, keep: int | None = None, requests: bool = True) -> StepLevels:
        """From now on, also keep each step's level measurements (``StepLevels``: ``keep``
        steps at most, None: all; ``requests``: their latencies, else tokens and chunks)."""
        if self.levels is None:
            self.levels = StepLevels(self.book, self.slo, keep, requests)
        return self.levels

    # ---- ingest -------------------------------------------------------------------------------
    def apply(self, events: Iterable[StepEvent]) -> None:
        for ev in events:
            self.book.apply(ev)
            if ev.kind == "begin":
                self._settled.pop(ev.index, None)
                self._open[ev.index] = OpenStep(StepTally(self.slo, self.exact_limit))

    def set_check(self, index: int, check: ClientCheck) -> None:
        """The client check recorded when the step ended (replaying a journal)."""
        if index in self._open:
            self._open[index].check = check

    def add_window(
        self,
        t0: float,
        t1: float,
        tokens: float,
        area_s: float,
        lag: LogHistogram | None = None,
        lateness: LogHistogram | None = None,
        worker: int = 0,
        sched: tuple[float, float, int, str | None] = (0.0, 0.0, 0, None),
    ) -> None:
        """A window of the load (``[t0, t1)``) from ``worker``: its tokens and in-flight area,
        shared among the steps by how much of it fell in their measured time (and among a
        level's bins by where); its loop lag to the step measuring at its middle."""
        if t1 <= t0:
            return
        mid = (t0 + t1) / 2
        for span in self.book.latest_started_by(t1):
            parts = list(span.overlaps(t0, t1))
            if self.levels is not None:
                self.levels.of(span).add_window_parts(parts, tokens, t1 - t0)
            entry = self._open.get(span.index)
            if entry is not None:
                overlap = sum(end - start for _, _, start, end in parts)
                if overlap > 0:
                    share = overlap / (t1 - t0)
                    entry.metered = True
                    entry.live_tokens += tokens * share
                    entry.area_s += area_s * share
                    entry.covered_s[worker] = entry.covered_s.get(worker, 0.0) + overlap
                    if span.measures(mid):
                        if lag is not None:
                            entry.lag.merge(lag)
                        if lateness is not None:
                            entry.lateness.merge(lateness)
                        entry.sched.add(t1 - t0, *sched)
            if span.start_s <= t0:
                break

    def note_inflight(
        self, worker: int, t: float, by_step: Iterable[tuple[int, int]]
    ) -> list[StepEvent]:
        """What ``worker`` had in flight per step tag at ``t`` (its window's end): the running
        step's clean start when the load is now clean (the events applied; journal them)."""
        self._inflight[worker] = dict(by_step)
        return self.book.settle(t, self.inflight())

    def forget_worker(self, worker: int) -> None:
        """A lost worker: its requests in flight are records already."""
        self._inflight.pop(worker, None)

    def inflight(self) -> dict[int, int]:
        """Requests in flight per step tag, all workers (as their last windows said)."""
        out: dict[int, int] = {}
        for by in self._inflight.values():
            for step, n in by.items():
                out[step] = out.get(step, 0) + n
        return out

    def note_sent(self, index: int, sent: int) -> None:
        """Requests sent so far in step ``index`` (all workers; warm-up included)."""
        if index in self._open:
            self._open[index].sent = sent

    def last_end(self, index: int) -> float:
        """When the last measured request of an open step ended (-inf before any)."""
        entry = self._open.get(index)
        return entry.tally.last_end_s if entry is not None else -math.inf

    def client_check(self, index: int) -> ClientCheck:
        """The step's achieved concurrency and loop lag (to record when it ends)."""
        entry = self._open.get(index)
        if entry is not None:
            return entry.client_check()
        done = self._settled.get(index)
        if done is None:
            return ClientCheck()
        s = done.stats
        return ClientCheck(
            s.achieved_concurrency, s.loop_lag_p99_s, s.send_lateness_p99_s, s.late_cause
        )

    def add_record(self, rec: RequestRecord) -> None:
        """A finished request: its tokens go to the steps its chunks fell in, its figures to
        its own step (and its level) when it was sent inside that step's measured time."""
        self._credit(rec)
        span = self.book.get(rec.step)
        if span is None:
            return
        measured = span.measures(rec.sent_s)
        entry = self._open.get(rec.step)
        if entry is not None:
            if measured:
                entry.tally.add(rec)
            else:
                entry.tally.exclude()  # sent in a warm-up (or a pause)
        if self.levels is not None and measured and rec.ok and not rec.warmup:
            self.levels.add_record(span, rec)

    def set_figures(self, index: int, figures: StepFigures) -> None:
        """A step's figures computed from all its measured records at once (a report)."""
        if index in self._open:
            self._open[index].figures = figures

    def credit_columns(self, cols: RecordColumns) -> None:
        """``add_record``'s token crediting for many records at once (a report's columns);
        with levels kept, the tokens also go to their bins."""
        if not len(cols) or not int(cols.chunks.sum()):
            return
        times = cols.chunk_times_s()
        per = np.where(cols.ok, cols.output_token_count / np.maximum(cols.chunks, 1), 1.0)
        weights = np.repeat(per, cols.chunks)
        has = cols.chunks > 0
        firsts = (cols.sent_s + cols.first_us / US)[has]
        prompts = cols.prompt_tokens[has]
        last, first = float(times.max()), float(firsts.min())
        for span, seg, lo, hi in self._windows(first, last):
            inside = (times >= lo) & (times < hi)
            if self.levels is not None and inside.any():
                self.levels.of(span).add_chunk_tokens(seg, lo, times[inside], weights[inside])
            entry = self._open.get(span.index)
            if entry is not None:
                entry.tokens += float(weights[inside].sum())
                starts = (firsts >= lo) & (firsts < hi) & (prompts >= 0)
                entry.prompt_tokens += float(prompts[starts].sum())

    def add_measured_columns(self, index: int, cols: RecordColumns, measured: np.ndarray) -> None:
        """Step ``index``'s records (``measured``: sent in its measured time), for its level:
        the successful ones, warm-up excluded (a report's columns; levels kept only)."""
        span = self.book.get(index)
        if self.levels is None or span is None:
            return
        sel = measured & ~cols.warmup & cols.ok
        kept = cols.take(sel)
        itl = cols.pooled_itl_s(sel) if cols.chunk_us is not None else np.empty(0)
        self.levels.of(span).add_columns(
            kept.sent_s, kept.ttft_s, kept.tpot_s, kept.e2el_s, kept.output_token_count, itl,
            kept.chunks,
        )  # fmt: skip

    def _windows(self, first: float, last: float) -> Iterator[tuple[StepSpan, int, float, float]]:
        """Each step's measured windows (``segment, lo, hi``) that overlap ``[first, last]``
        (when chunks arrived): steps started by ``last``, newest first, down to the one
        ``first`` is in (steps before it ended before the first chunk)."""
        for span in self.book.latest_started_by(last):
            for seg, (lo, hi) in enumerate(span.windows()):
                if not (hi <= first or lo > last):
                    yield span, seg, lo, hi
            if span.start_s <= first:
                break

    def add_server(self, snap: ServerSnapshot) -> None:
        """A snapshot from the scraper (``add_scrape``)."""
        self.add_scrape(snap.timestamp_s, ServerSample.of(snap), spec_counters(snap))

    def add_sample(self, sample: ServerSample) -> None:
        """A good scrape's figures alone (``add_scrape``)."""
        self.add_scrape(sample.t, sample, None)

    def add_scrape(self, t: float, sample: ServerSample | None, spec: SpecCounters | None) -> None:
        """A scrape at ``t``, for the step measuring then: its figures (``sample``; None: not
        a good scrape) as the step's server evidence, its spec counters for the step's level."""
        span = self.book.measuring(t)
        if span is None:
            return
        entry = self._open.get(span.index)
        if sample is not None and entry is not None and len(entry.samples) < MAX_SAMPLES:
            entry.samples.append(sample)
        if self.levels is not None and spec:
            self.levels.of(span).spec.observe(spec)

    def settle(self, up_to_index: int | None = None) -> None:
        """Every request of the ended steps up to ``up_to_index`` (all: None) has arrived."""
        for index in sorted(self._open):
            span = self.book.get(index)
            if up_to_index is not None and index > up_to_index:
                break
            if span is None or not span.ended:
                continue
            self._settled[index] = self._result(span, self._open.pop(index), settled=True)

    # ---- queries ------------------------------------------------------------------------------
    def results(self, now: float) -> tuple[StepResult, ...]:
        """Every step in order: settled ones as computed once, the others as they stand."""
        out = []
        for span in self.book.steps:
            done = self._settled.get(span.index)
            if done is not None:
                out.append(done)
            elif span.index in self._open:
                out.append(self._result(span, self._open[span.index], now=now))
        return tuple(out)

    def unsettled(self) -> list[int]:
        """The steps still gathering, in order."""
        return sorted(self._open)

    def settled_results(self) -> tuple[StepResult, ...]:
        return tuple(self._settled[i] for i in sorted(self._settled))

    def knee_points(self, now: float) -> list[KneePoint | None]:
        """Every step as the knee rule reads it (None: a step it may not judge)."""
        return [r.knee_point for r in self.results(now)]

    def knee(self, now: float) -> Knee | None:
        return find_knee(self.knee_points(now))

    def slo_limit(self, now: float) -> int | None:
        return slo_max_concurrency(self.knee_points(now))

    # ---- internals ----------------------------------------------------------------------------
    def _result(
        self, span: StepSpan, entry: OpenStep, *, settled: bool = False, now: float | None = None
    ) -> StepResult:
        at = now if now is not None else (span.end_s or span.start_s)
        duration = span.measured_s(at)
        check = entry.client_check()
        live = not settled and entry.metered
        fig = entry.figures if entry.figures is not None else entry.tally.figures()
        stats = assemble(
            fig,
            duration,
            concurrency=span.level.concurrency,
            rate=span.level.rate,
            achieved_concurrency=check.achieved_concurrency,
            loop_lag_p99_s=check.loop_lag_p99_s,
            send_lateness_p99_s=check.send_lateness_p99_s,
            late_cause=check.late_cause,
            window_output_tokens=entry.live_tokens if live else entry.tokens,
            window_prompt_tokens=entry.prompt_tokens,
            sending_s=_sending_s(span, fig, duration),
        )
        attempts = stats.completed + stats.failed + stats.cancelled
        held = attempts if settled else max(attempts, entry.sent)
        eligible = duration >= self.min_hold_s and held >= self.min_requests and not span.transition
        queued = not eligible and _queued_throughout(span, entry.samples)
        return StepResult(span, stats, evidence_of(entry.samples), eligible, settled, queued)

    def _credit(self, rec: RequestRecord) -> None:
        times = rec.chunk_times_s
        if not times:
            return
        per_chunk = tokens_per_chunk(rec)
        first, last = times[0], times[-1]
        for span, _, lo, hi in self._windows(first, last):
            entry = self._open.get(span.index)
            if entry is not None:
                entry.tokens += chunks_between(times, lo, hi, per_chunk)
                if rec.prompt_tokens is not None and lo <= first < hi:
                    entry.prompt_tokens += rec.prompt_tokens


def _sending_s(span: StepSpan, fig: StepFigures, duration_s: float) -> float:
    """How long a rate step sent for: to its last measured send plus one mean gap (the next
    arrival would have come then), at most its measured time. A step measured to its last
    request's end (``--step-requests``) stopped sending before its drain; its rate is not the
    requests over a time that includes the drain. Other modes, and paused steps: the
    measured time."""
    rate = span.level.rate
    if not rate or len(span.segments) != 1 or math.isnan(fig.last_sent_s):
        return duration_s
    return min(duration_s, fig.last_sent_s - span.measure_from_s + 1.0 / rate)


def _queued_throughout(span: StepSpan, samples: list[ServerSample]) -> bool:
    c = span.level.concurrency
    if c is None:
        return False
    return queued_throughout(
        c, [x.t for x in samples], [x.running for x in samples], [x.waiting for x in samples]
    )
