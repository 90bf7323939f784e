"""The live Session: the one place state lives while the monitor runs.

The controller pushes into it what happens (records, the load's windows, server snapshots,
step changes, marks); the UI pulls a frozen ``DashboardSnapshot`` on its render clock. It is
pure: no I/O, no Textual, time comes from the caller. Steps live in a ``StepLedger`` (the one
step model, shared with bench and reports); the live figures come from the workers' windows;
memory stays bounded over a day.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from infmon.model.base.rates import TrailingRate
from infmon.model.base.sanitize import redact_url
from infmon.model.compare.baseline import BaselineView, Reference, RunFacts
from infmon.model.compare.live_side import LiveBaseline, facts_from_snapshot
from infmon.model.live.anatomy_live import AnatomyBook
from infmon.model.live.dashboard import (
    BaselineStep,
    Cause,
    DashboardSnapshot,
    HeaderView,
    KneeView,
    LatencyView,
    ServerView,
    ThroughputView,
)
from infmon.model.live.diagnose import CauseBook, DiagnosisInputs, diagnose
from infmon.model.live.eventlog import EventLog
from infmon.model.live.series import SampleSeries
from infmon.model.live.server_state import ServerState
from infmon.model.live.step_views import (
    Closing,
    baseline_view,
    closing,
    knee_points,
    latency_view,
)
from infmon.model.live.windows import LiveWindows
from infmon.model.records.measures import SLO, meets_slo
from infmon.model.records.request import RequestRecord
from infmon.model.records.window import LoadWindow
from infmon.model.search.frontier import SEARCHES_FOR, FrontierView
from infmon.model.server.gpu_state import GpuState
from infmon.model.server.health import DOWN, NO_METRICS, ServerHealth
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.knee import Knee, KneePoint, KneeWatch, find_knee
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.result import StepResult
from infmon.model.steps.slo_verdict import slo_verdict
from infmon.model.steps.span import CLOSED, StepEvent
from infmon.model.steps.step_levels import LevelSample
from infmon.model.steps.tally import LIVE_EXACT_LIMIT

if TYPE_CHECKING:
    from infmon.model.steps.evidence import ServerEvidence

NAN = math.nan


@dataclass(slots=True)
class SessionConfig:
    endpoint: str = ""
    slo: SLO = field(default_factory=SLO)
    window_s: float = 30.0
    """Latency percentiles cover requests finished in the last ``window_s``."""
    throughput_window_s: float = 10.0
    history_samples: int = 600
    """Length of the over-time series (one sample per second)."""
    step_warmup_s: float = 3.0
    min_step_s: float = 5.0
    """A step held shorter than this (or with fewer than ``min_step_requests``) is shown but
    never feeds the knee."""
    min_step_requests: int = 20
    max_events: int = 200

    def __post_init__(self) -> None:
        self.endpoint = redact_url(self.endpoint)  # shown on screen: no URL's password


PAUSED_RATE_SPAN_S = 1.0
"""The shortest span the live rates cover after a pause (a scrape interval)."""
SAY_SETTLE_S = 1.0
"""A clean start that took at least this long after the change is said in the events."""
PAUSED_SERVER_FLOOR_TOK_S = 1.0
"""While paused with nothing of ours in flight, a server rate below this is the tail of our
own sizing probes or the counter's rounding, not traffic: the series shows nothing."""


class Session:
    """Ingests what happens; answers ``snapshot(now)``."""

    def __init__(
        self,
        config: SessionConfig | None = None,
        *,
        start_s: float = 0.0,
        health: ServerHealth | None = None,
    ) -> None:
        self.config = c = config or SessionConfig()
        self.start_s = start_s
        self.ledger = StepLedger(
            c.slo,
            min_hold_s=c.min_step_s,
            min_requests=c.min_step_requests,
            exact_limit=LIVE_EXACT_LIMIT,  # a level held for a day stays in bounded memory
        )
        self.health = health or ServerHealth()
        self.windows = LiveWindows(keep_s=max(c.window_s, c.throughput_window_s) + 5)
        self.server = ServerState()
        self.knee_watch = KneeWatch()
        """The knee as shown: one the figures stop holding is said withdrawn, not dropped."""
        self.method = LiveBaseline(self.ledger)
        """Levels against a baseline run, spec decoding per level, KV against the knee."""
        self.gpus = GpuState()
        self.anatomy = AnatomyBook()
        """Each step's latency split by the server's own per-request figures."""
        self._good: deque[tuple[float, bool]] = deque()
        self._size_sum = self._size_n = 0
        """Prompt + output tokens of the finished requests (the KV figures' sequence length,
        over the session as the report has it)."""
        self.series = SampleSeries(start_s, c.history_samples)
        self.events = EventLog(start_s, c.max_events)
        self._server_gen = TrailingRate()
        self._paused = True
        self._paused_at: float | None = None
        """When the load was last paused (the live rates never reach back past it)."""
        self._sweep: str | None = None
        self._journal_note: str | None = None
        self._baseline: int | None = None
        self.causes = CauseBook()
        self._started = False
        self._hint: str | None = None
        self._last_begun: int | None = None
        self._verdict: str | None = None
        """Why the last sweep stopped and what it holds (shown until the operator moves)."""
        self._search_goal: str | None = None
        self._frontier: FrontierView | None = None
        """The load search's frontier (shown until the operator moves)."""
        self._meta: dict[str, str | None] = {"model": None, "backend": None, "version": None}
        self._views: tuple[ThroughputView, LatencyView, ServerView, KneeView] | None = None
        self.succeeded = self.failed = self.cancelled = 0

    # ---- ingest -------------------------------------------------------------------------------
    def add_record(self, rec: RequestRecord) -> None:
        """A finished (or failed, or cancelled) request, decoded as the journal keeps it (the
        ledger has it already: ``RunWiring`` feeds it)."""
        self.anatomy.add(rec)
        if rec.error_kind == "cancelled":
            self.cancelled += 1
        elif not rec.ok:
            self.failed += 1
        else:
            self.succeeded += 1
            good = self.config.slo.empty or meets_slo(rec, self.config.slo)
            self._good.append((rec.end_s, good))
            if rec.prompt_tokens is not None and rec.output_tokens is not None:
                self._size_sum += rec.prompt_tokens + rec.output_tokens
                self._size_n += 1

    def add_window(self, w: LoadWindow) -> None:
        self.windows.add(w)
        self._settle()

    def add_server(self, snap: ServerSnapshot, now: float) -> None:
        """A snapshot from the scraper (health has seen it already: ``ServerHealth.observe``)."""
        if not snap.ok:
            self._views = None
            return
        models = snap.models
        self.set_server_info(
            model=models[0] if models else None, backend=snap.backend, version=snap.backend_version
        )
        self.server.add(snap)
        self.gpus.add(snap, now)
        self._server_gen.add(now, snap.generation_tokens_per_s, snap.window_s)
        self._views = None

    def apply_steps(self, events: list[StepEvent], now: float) -> None:
        """Step changes (the controller journals the same events)."""
        self.ledger.apply(events)
        self.note_steps(events, now)

    def note_steps(self, events: list[StepEvent], now: float) -> None:
        """Step changes the ledger holds already (a clean start it saw in a window)."""
        for ev in events:
            if ev.kind == "settle":
                self._note_settle(ev)
            span = self.ledger.book.get(ev.index)
            if ev.kind == "begin" and span is not None:
                more = f" (revisit of step {span.revisit_of})" if span.revisit_of else ""
                if ev.index == self._last_begun:  # the step was replaced (a coalesced press)
                    self.events.drop_last("load", f"step {ev.index}: ")
                self._last_begun = ev.index
                if span.origin == "operator":
                    self._verdict = self._frontier = None  # the operator moved on from the hold
                self.add_event(now, "load", f"step {ev.index}: {span.level.label}{more}")
                self.series.step_started(ev.t, span.level.label)
        self._views = None

    def _note_settle(self, ev: StepEvent) -> None:
        span = self.ledger.book.get(ev.index)
        if span is not None and ev.t - span.segments[-1].start_s >= SAY_SETTLE_S:
            took = ev.t - span.segments[-1].start_s
            text = f"step {ev.index}: {span.level.label} clean {took:.0f} s after the change"
            self.add_event(ev.t, "load", f"{text}; measured from here")

    def set_server_info(
        self, *, model: str | None = None, backend: str | None = None, version: str | None = None
    ) -> None:
        for key, value in (("model", model), ("backend", backend), ("version", version)):
            if value:
                self._meta[key] = value

    def set_paused(self, paused: bool, now: float) -> None:
        self._started |= not paused
        if paused != self._paused:
            self._paused = paused
            self._paused_at = now if paused else None
            self.add_event(now, "state", "load paused" if paused else "load running")

    def set_hint(self, hint: str | None) -> None:
        """A line for the operator that overrides the paused hint (``quitting: …``)."""
        self._hint = hint

    def set_sweep(self, progress: str | None) -> None:
        self._sweep = progress
        if progress:
            self._verdict = None

    def set_search(self, goal: str | None, frontier: FrontierView | None = None) -> None:
        """What ``w`` searches for (``--search``), and the frontier of the search so far."""
        self._search_goal, self._frontier, self._views = goal, frontier, None

    def set_journal_note(self, note: str | None) -> None:
        """``journal: disk full since 12:03:41, 1,204 records held in memory`` (None: fine)."""
        self._journal_note = note

    def add_mark(self, now: float, note: str) -> None:
        self._advance(now)
        self.series.mark()
        self.add_event(now, "mark", f"mark: {note}" if note else "mark")

    def set_baseline(self, now: float) -> int | None:
        """The current step becomes the baseline the panes compare against."""
        cur = self.ledger.book.steps[-1] if self.ledger.book.steps else None
        if cur is None:
            return None
        self._baseline = cur.index
        self._views = None
        self.add_event(
            now,
            "mark",
            f"baseline: step {cur.index} ({cur.level.label}): later steps at "
            f"{cur.level.label} are compared with it",
        )
        return cur.index

    def set_reference(self, ref: Reference, now: float) -> None:
        """Compare every level with ``ref``'s at the same level (``--baseline RUN``)."""
        self.method.set_reference(ref)
        self.add_event(now, "mark", f"baseline run: {ref.name} ({ref.source})")
        self._views = None

    @property
    def tokens_per_seq(self) -> float:
        """Mean prompt + output tokens of the finished requests (nan before any)."""
        return self._size_sum / self._size_n if self._size_n else NAN

    def facts(self) -> RunFacts:
        return facts_from_snapshot(self.server.last, self.server.max_num_seqs, self.tokens_per_seq)

    def baseline_inputs(
        self, now: float
    ) -> tuple[Reference, tuple[LevelSample, ...], RunFacts] | None:
        """What the comparison with the baseline run needs (copies, for another thread)."""
        return self.method.inputs(now, self._evidence(now), self.facts())

    def _server_ttft_s(self) -> dict[int, float]:
        """Each settled step's server TTFT histogram mean (the anatomy's front split)."""
        return {
            r.index: r.evidence.server_ttft_s
            for r in self.ledger.settled_results()
            if r.evidence is not None and math.isfinite(r.evidence.server_ttft_s)
        }

    def _evidence(self, now: float) -> dict[int, ServerEvidence | None]:
        return {r.index: r.evidence for r in self.ledger.results(now)}

    def set_baseline_view(self, view: BaselineView, now: float) -> None:
        """The comparison computed from ``baseline_inputs``; a level's diagnosis becomes an
        event when it first appears (not again each time its figures move)."""
        old = self.method.view
        before = {c.level for c in old.levels if c.diagnosis} if old is not None else set()
        self.method.view = view
        for c in view.levels:
            if c.diagnosis and c.level not in before:
                self.add_event(now, "diagnosis", c.diagnosis)
        self._views = None

    def add_event(self, now: float, kind: str, text: str) -> None:
        self.events.add(now, kind, text)

    def set_verdict(self, text: str) -> None:
        """Why the sweep stopped and what it holds: the story's end stays in view on the hint
        line until the operator moves."""
        self._verdict = text

    # ---- queries ------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    def results(self, now: float) -> tuple[StepResult, ...]:
        return self.ledger.results(now)

    def current(self, now: float) -> StepResult | None:
        cur = self.ledger.book.current
        if cur is None:
            return None
        return next((r for r in self.ledger.results(now) if r.index == cur.index), None)

    def snapshot(self, now: float) -> DashboardSnapshot:
        """Everything the panes render. The windowed views are rebuilt once per second (with the
        series), so between samples the same objects come back and equal panes do not repaint."""
        self._advance(now)
        fresh = self.method.poll(now, lambda: self._evidence(now), self.facts)
        if fresh is not None:
            self.set_baseline_view(fresh, now)
        elif self.method.error:
            self.add_event(now, "error", self.method.error)
            self.method.error = None
        if self._views is None:
            self._views = self._build_views(now)
        throughput, latency, server, knee = self._views
        view = self.method.view
        return DashboardSnapshot(
            header=self._header_view(now, server),
            throughput=throughput,
            latency=latency,
            server=server,
            knee=knee,
            events=self.events.items(),
            diagnosis=self.causes.causes + _baseline_causes(view),
            baseline=view,
            gpu=self.gpus.view(),
        )

    def closing(self, now: float) -> Closing:
        """The session in one paragraph (what the monitor prints when it quits)."""
        knee = self._watch_knee(now, self.ledger.knee_points(now))
        return closing(
            self.ledger.results(now),
            knee,
            self.ledger.slo_limit(now),
            (self.succeeded, self.failed, self.cancelled),
            now - self.start_s,
            not self.config.slo.empty,
            withdrawn=self.knee_watch.withdrawn,
        )

    def _watch_knee(self, now: float, points: list[KneePoint | None]) -> Knee | None:
        """The knee of ``points`` (the steps as the rule reads them now); a knee shown earlier
        that this one withdraws is said in the events."""
        knee = find_knee(points)
        gone = self.knee_watch.update(knee, points)
        if gone is not None:
            self.add_event(now, "diagnosis", gone.text)
        return knee

    # ---- internals ----------------------------------------------------------------------------
    def _settle(self) -> None:
        """Settle each ended step once no request sent up to it is still in flight."""
        for index in self.ledger.unsettled():
            span = self.ledger.book.get(index)
            end = span.end_s if span is not None else None
            if end is None:
                break  # the running step, and none after it, can settle
            if self.windows.reported_since(end) and self.windows.inflight_through(index) == 0:
                self.ledger.settle(index)

    def _build_views(self, t: float) -> tuple[ThroughputView, LatencyView, ServerView, KneeView]:
        return (
            self._throughput_view(t),
            replace(
                latency_view(self.windows, self.config.window_s, self.config.slo, self.series, t),
                anatomy=self.anatomy.view(self._server_ttft_s()),
            ),
            self._server_view(t),
            self._knee_view(t),
        )

    def _advance(self, now: float) -> None:
        """Close every whole second up to ``now`` into the over-time series."""
        for t, last in self.series.due(now):
            self._take_sample(t, diagnose_now=last)

    def _take_sample(self, t: float, diagnose_now: bool = True) -> None:
        tv, lat, server = (
            self._throughput_view(t),
            latency_view(self.windows, self.config.window_s, self.config.slo, self.series, t),
            self._server_view(t),
        )
        server_rate = tv.server_generation_tokens_per_s
        if self._paused and not self.windows.inflight and server_rate < PAUSED_SERVER_FLOOR_TOK_S:
            server_rate = NAN
        self.series.append(
            {
                "client": tv.client_output_tokens_per_s,
                "server": server_rate,
                "ttft": lat.ttft.p90_s,
                "tpot": lat.tpot.p90_s,
                "itl": lat.itl.p90_s,
                "e2el": lat.e2el.p90_s,
                "kv": server.kv_usage_fraction,
            }
        )
        if diagnose_now:
            self._update_diagnosis(t, server, tv)
        self._views = None

    def _update_diagnosis(self, t: float, server: ServerView, tv: ThroughputView) -> None:
        cur = self.ledger.book.current
        lines = diagnose(
            DiagnosisInputs(
                server=server,
                client_output_tokens_per_s=tv.client_output_tokens_per_s,
                recent_client_series=self.series.recent("client", 30),
                step_age_s=cur.held_s(t) if cur else NAN,
                load_mode=cur.level.mode if cur else CLOSED,
                load_level=cur.level.value if cur else 0.0,
                inflight_requests=self.windows.inflight,
                paused=self._paused,
                gpu=self.gpus.evidence(),
                ttft_p90_series=self.series.recent("ttft", 30),
                recent_server_series=self.series.recent("server", 30),
            )
        )
        self.causes.update(lines, cur.index if cur else None, t - self.start_s)

    def _rate_span(self, now: float) -> float:
        """The live rates' trailing span: ``throughput_window_s``, but never back past a pause
        (a paused load's figures are what it does now: its drain, then nothing)."""
        span = min(self.config.throughput_window_s, max(now - self.start_s, 1e-9))
        if self._paused_at is not None:
            span = min(span, max(now - self._paused_at, PAUSED_RATE_SPAN_S))
        return span

    def _throughput_view(self, now: float) -> ThroughputView:
        span = self._rate_span(now)
        rates = self.windows.rates(now, span)
        while self._good and self._good[0][0] < now - self.config.window_s:
            self._good.popleft()
        good = sum(1 for end, ok in self._good if end > now - rates.span_s and end <= now)
        base = self._baseline_compare(now)
        base_tok_s = base.output_tokens_per_s if base else self._reference_tok_s()
        return ThroughputView(
            client_output_tokens_per_s=rates.output_tokens_per_s,
            server_generation_tokens_per_s=self._server_generation(now, span),
            requests_per_s=rates.requests_per_s,
            goodput_requests_per_s=good / rates.span_s
            if not self.config.slo.empty and rates.span_s > 0
            else NAN,
            error_fraction=rates.error_fraction,
            client_series=self.series["client"],
            server_series=self.series["server"],
            mark_offsets=self.series.mark_offsets(),
            baseline_output_tokens_per_s=base_tok_s,
            step_marks=self.series.step_marks(),
            baseline=base,
        )

    def _reference_tok_s(self) -> float:
        """The baseline run's tok/s at the current level (nan: none, or it did not run it)."""
        cur, view = self.ledger.book.current, self.method.view
        at = view.at(cur.level) if view is not None and cur is not None else None
        d = at.get("tok_s") if at is not None and at.in_baseline else None
        return d.delta.base if d is not None else NAN

    def _server_generation(self, now: float, span_s: float) -> float:
        rate = self._server_gen.over(now, span_s)
        if rate is not None:
            return rate
        return NAN if self._paused_at is not None else self.server.view(NAN).generation_tokens_per_s

    def _server_view(self, now: float) -> ServerView:
        view = self.server.view(self.tokens_per_seq)
        h = self.health
        down = h.down_since_s - self.start_s if h.down_since_s is not None else None
        last = self.server.last_at_s
        spec = view.spec
        if spec is not None:
            stats = {r.index: (r.stats.itl.p50, r.stats.tpot.p50) for r in self.ledger.results(now)}
            spec = replace(spec, levels=self.method.spec_levels(stats))
        return replace(
            view,
            spec=spec,
            up=h.state != DOWN,
            down_since_s=down,
            no_metrics=h.state == NO_METRICS and not view.has_data,
            stale_s=now - last if last is not None else NAN,
            error=h.last_error,
            kv_series=self.series["kv"],
        )

    def _header_view(self, now: float, server: ServerView) -> HeaderView:
        cur = self.ledger.book.steps[-1] if self.ledger.book.steps else None
        if not server.up:
            state = "server down"
        elif self._paused:
            state = "paused"
        else:
            state = ("searching" if self._search_goal else "sweeping") if self._sweep else "running"
        base = self.ledger.book.get(self._baseline) if self._baseline is not None else None
        return HeaderView(
            endpoint=self.config.endpoint,
            model=self._meta["model"],
            backend=self._meta["backend"],
            backend_version=self._meta["version"],
            load_mode=cur.level.mode if cur else CLOSED,
            load_level=cur.level.value if cur else 0.0,
            state=state,
            elapsed_s=float(int(now - self.start_s)),
            inflight_requests=self.windows.inflight,
            baseline_step=self._baseline,
            failed=self.failed,
            cancelled=self.cancelled,
            sweep=self._sweep,
            backoff=self.windows.backoff,
            journal=self._journal_note,
            baseline_run=self.method.reference.name if self.method.reference else None,
            baseline_changes=self.method.view.changes if self.method.view else (),
            started=self._started,
            paused=self._paused,
            hint=self._hint
            or self._paused_hint(cur.level.label if cur else "c=1")
            or self._verdict,
            baseline_label=base.level.label if base is not None else None,
            search=self._search_goal,
        )

    def _paused_hint(self, level: str) -> str | None:
        if not self._paused:
            return None
        goal = self._search_goal
        w = f"w searches for {SEARCHES_FOR.get(goal, goal)}" if goal else "w sweeps"
        if not self._started:
            return f"paused: space starts {level}, {w}{'' if goal else ' 1, 2, 4, … to the knee'}"
        return f"paused: space resumes {level}, {w}"

    def _baseline_compare(self, now: float) -> BaselineStep | None:
        if self._baseline is None:
            return None
        results = self.ledger.results(now)
        base = next((r for r in results if r.index == self._baseline), None)
        cur = self.ledger.book.current
        running = next((r for r in results if cur is not None and r.index == cur.index), None)
        return baseline_view(base, running, now)

    def _knee_view(self, now: float) -> KneeView:
        points = self.ledger.knee_points(now)
        knee = self._watch_knee(now, points)
        withdrawn = self.knee_watch.withdrawn
        results = [r for r in self.ledger.results(now) if r.span.level.mode == CLOSED]
        fill, limit = self.method.knee_limit(knee, points, self.facts())
        view = self.method.view
        return KneeView(
            steps=knee_points(self.ledger.results(now), now),
            knee_level=knee.concurrency if knee else None,
            slo_limit_level=self.ledger.slo_limit(now),
            slo_text="" if self.config.slo.empty else slo_verdict(results, True).text(),
            baseline_index=self._baseline,
            knee_confirmed=knee.confirmed if knee else False,
            knee_reason=knee.reason if knee else "",
            withdrawn=withdrawn.text if withdrawn is not None else "",
            kv_fill_level=fill,
            knee_limit=limit.text,
            baseline=view.levels if view is not None else (),
            frontier=self._frontier,
        )


def _baseline_causes(view: BaselineView | None) -> tuple[Cause, ...]:
    """The comparison with the baseline run's diagnosis lines (one per level), as causes."""
    if view is None:
        return ()
    return tuple(Cause(f"baseline-{i}", line) for i, line in enumerate(view.diagnosis))
