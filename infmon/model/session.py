"""The live Session: the one place state lives while the monitor runs.

Sources push into it (request records, server snapshots, operator actions) and the UI pulls a
frozen ``DashboardSnapshot`` from it on its render clock. It is pure: no I/O, no Textual, time
comes from the caller. Windows are ring buffers, so memory stays flat in long sessions.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from infmon.model.dashboard import (
    DashboardSnapshot,
    Event,
    HeaderView,
    KneeView,
    LatencyView,
    ServerView,
    StepPoint,
    ThroughputView,
)
from infmon.model.diagnose import DiagnosisInputs, diagnose
from infmon.model.live_steps import (
    LiveStep,
    credit_tokens,
    knee_of,
    percentiles,
    slo_limit_of,
    step_point,
)
from infmon.model.rates import TrailingRate
from infmon.model.records import RequestRecord
from infmon.model.server_view import server_view_from
from infmon.model.stats import SLO, meets_slo, pooled_itl_s

NAN = math.nan
HELD_FIELDS = ("queue_s", "prefill_s", "decode_s", "prefix_hit_rate")
SAMPLE_PERIOD_S = 1.0
"""The over-time series get one sample per second."""


@dataclass(slots=True)
class SessionConfig:
    endpoint: str = ""
    slo: SLO = field(default_factory=SLO)
    window_s: float = 30.0
    """Latency percentiles cover requests finished in the last ``window_s``."""
    throughput_window_s: float = 10.0
    history_samples: int = 600
    """Length of the over-time series (one sample per second)."""
    max_window_records: int = 50_000
    step_warmup_s: float = 3.0
    min_step_s: float = 5.0
    """A step held shorter than this is not a point in the knee view."""
    max_events: int = 200
    max_step_records: int = 20_000


class Session:
    """Ingests records, server snapshots and operator actions; answers ``snapshot(now)``."""

    def __init__(self, config: SessionConfig | None = None, *, start_s: float = 0.0) -> None:
        self.config = config or SessionConfig()
        self.start_s = start_s
        self._recent: deque[RequestRecord] = deque(maxlen=self.config.max_window_records)
        n = self.config.history_samples
        self._client_series: deque[float] = deque(maxlen=n)
        self._server_series: deque[float] = deque(maxlen=n)
        self._ttft_series: deque[float] = deque(maxlen=n)
        self._tpot_series: deque[float] = deque(maxlen=n)
        self._e2el_series: deque[float] = deque(maxlen=n)
        self._kv_series: deque[float] = deque(maxlen=n)
        self._samples_taken = 0
        self._mark_samples: deque[int] = deque(maxlen=100)
        self._events: deque[Event] = deque(maxlen=self.config.max_events)
        self._steps: list[LiveStep] = []
        self._server_raw: Any = None
        self._server_gen = TrailingRate()
        self._server_at_s: float | None = None
        self._down_since_s: float | None = None
        self._server_error: str | None = None
        self._paused = True
        self._sweeping = False
        self._baseline: int | None = None
        self._inflight: int | None = None
        self._active_diagnosis: set[str] = set()
        self._diagnosis: tuple[str, ...] = ()
        self._meta: dict[str, str | None] = {"model": None, "backend": None, "version": None}
        self._views: tuple[ThroughputView, LatencyView, ServerView, KneeView] | None = None
        self._no_metrics = False
        self._last_known: dict[str, float] = {}

    # ---- ingest -------------------------------------------------------------------------------
    def add_record(self, rec: RequestRecord) -> None:
        """A finished (or failed) request; filed into the step that was active when it was sent."""
        self._recent.append(rec)
        credit_tokens(self._steps, rec)
        step = self._step_at(rec.sent_s)
        if step is not None and len(step.records) < self.config.max_step_records:
            step.records.append(rec)

    def add_server(self, snapshot: Any, now: float) -> None:
        """A good scrape: the server is up (an outage ends here)."""
        if self._down_since_s is not None:
            self.add_event(now, "server", "server back up")
        self._server_raw = snapshot
        self._server_gen.add(
            now,
            getattr(snapshot, "generation_tokens_per_s", None),
            getattr(snapshot, "window_s", None),
        )
        self._server_at_s = now
        self._down_since_s = None
        self._server_error = None
        if self._views is None or not self._views[2].has_data or not self._views[2].up:
            self._views = None

    def ingest_server_snapshot(self, snap: Any, now: float) -> None:
        """A ``ServerSnapshot`` from the poller: ok, stale/down (an outage), or no metrics."""
        state = getattr(snap, "state", "ok")
        if state == "ok":
            models = getattr(snap, "models", ()) or ()
            self.set_server_info(
                model=models[0] if models else None,
                backend=getattr(snap, "backend", None),
                version=getattr(snap, "backend_version", None),
            )
            if getattr(snap, "server_restarted", False):
                self.add_event(now, "server", "server restarted (counters reset)")
            self.add_server(snap, now)
        elif state == "no_metrics":
            if not self._no_metrics:
                self.add_event(now, "server", "the server publishes no /metrics: client view only")
                self._views = None
            self._no_metrics = True
        else:
            kind = getattr(snap, "error_kind", None) or state
            message = getattr(snap, "error_message", None) or ""
            self.server_failed(now, f"{kind}: {message}" if message else kind)

    def server_failed(self, now: float, error: str) -> None:
        """A failed scrape: the server is shown down from the first failure on."""
        if self._down_since_s is None:
            self._down_since_s = now
            self.add_event(now, "server", f"server down: {error}")
            self._views = None
        self._server_error = error

    def set_server_info(
        self, *, model: str | None = None, backend: str | None = None, version: str | None = None
    ) -> None:
        for key, value in (("model", model), ("backend", backend), ("version", version)):
            if value:
                self._meta[key] = value

    def set_load(self, mode: str, level: float, now: float) -> None:
        """The operator (or the sweep) set a new load level: a new step starts."""
        current = self._steps[-1] if self._steps else None
        if current is not None and current.mode == mode and current.level == level:
            return
        if current is not None:
            current.end_s = now
            old = f"{_fmt_level(current.mode, current.level)} → "
        else:
            old = ""
        warm = self.config.step_warmup_s
        self._steps.append(LiveStep(len(self._steps), mode, level, now, warmup_s=warm))
        self.add_event(now, "load", f"{old}{_fmt_level(mode, level)}")

    def set_paused(self, paused: bool, now: float) -> None:
        if paused != self._paused:
            self._paused = paused
            self.add_event(now, "state", "load paused" if paused else "load running")

    def set_sweeping(self, sweeping: bool, now: float, why: str = "") -> None:
        if sweeping != self._sweeping:
            self._sweeping = sweeping
            text = "sweep started" if sweeping else "sweep stopped"
            self.add_event(now, "sweep", f"{text}: {why}" if why else text)

    def set_inflight(self, inflight: int | None) -> None:
        self._inflight = inflight

    def add_mark(self, now: float, note: str) -> None:
        self._advance(now)
        self._mark_samples.append(self._samples_taken)
        self.add_event(now, "mark", f"mark: {note}" if note else "mark")

    def set_baseline(self, now: float) -> int | None:
        """The current step becomes the baseline the panes compare against."""
        if not self._steps:
            return None
        self._baseline = self._steps[-1].index
        step = self._steps[-1]
        self.add_event(
            now, "mark", f"baseline: step {step.index} ({_fmt_level(step.mode, step.level)})"
        )
        return self._baseline

    def add_event(self, now: float, kind: str, text: str) -> None:
        self._events.append(Event(now - self.start_s, kind, text))

    # ---- queries ------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def current_step(self) -> StepPoint | None:
        return self._step_point(self._steps[-1], None) if self._steps else None

    def step_points(self, now: float) -> tuple[StepPoint, ...]:
        """Every step held at least ``min_step_s``, in order."""
        points = []
        for step in self._steps:
            end = step.end_s if step.end_s is not None else now
            if end - step.start_s >= self.config.min_step_s:
                points.append(self._step_point(step, now))
        return tuple(points)

    def snapshot(self, now: float) -> DashboardSnapshot:
        """Everything the panes render. The windowed views are rebuilt once per second (with the
        series), so between samples the same objects come back and equal panes do not repaint."""
        self._advance(now)
        if self._views is None:
            self._views = self._build_views(now)
        throughput, latency, server, knee = self._views
        return DashboardSnapshot(
            header=self._header_view(now, server),
            throughput=throughput,
            latency=latency,
            server=server,
            knee=knee,
            events=tuple(self._events),
            diagnosis=self._diagnosis,
        )

    def _build_views(self, t: float) -> tuple[ThroughputView, LatencyView, ServerView, KneeView]:
        return (
            self._throughput_view(t),
            self._latency_view(t),
            self._server_view(t),
            self._knee_view(t),
        )

    # ---- internals ----------------------------------------------------------------------------
    def _step_at(self, t: float) -> LiveStep | None:
        for step in reversed(self._steps):
            if step.start_s <= t:
                return step
        return self._steps[0] if self._steps else None

    def _window(self, now: float, window_s: float) -> list[RequestRecord]:
        lo = now - window_s
        out = []
        for rec in reversed(self._recent):
            if rec.end_s < lo:
                break
            if rec.end_s <= now:
                out.append(rec)
        return out

    def _advance(self, now: float) -> None:
        """Close every whole second up to ``now`` into the over-time series (at most a history)."""
        due = int((now - self.start_s) / SAMPLE_PERIOD_S)
        if due <= self._samples_taken:
            return
        self._samples_taken = max(self._samples_taken, due - self.config.history_samples)
        while self._samples_taken < due:
            self._samples_taken += 1
            t = self.start_s + self._samples_taken * SAMPLE_PERIOD_S
            self._take_sample(t, diagnose_now=self._samples_taken == due)

    def _take_sample(self, t: float, diagnose_now: bool = True) -> None:
        tv = self._throughput_view(t)
        lat = self._latency_view(t)
        server = self._server_view(t)
        self._client_series.append(tv.client_output_tokens_per_s)
        self._server_series.append(tv.server_generation_tokens_per_s)
        self._ttft_series.append(lat.ttft.p90_s)
        self._tpot_series.append(lat.tpot.p90_s)
        self._e2el_series.append(lat.e2el.p90_s)
        self._kv_series.append(server.kv_usage_fraction)
        if diagnose_now:
            self._update_diagnosis(t, server, tv)
        self._views = None

    def _update_diagnosis(self, t: float, server: ServerView, tv: ThroughputView) -> None:
        current = self._steps[-1] if self._steps else None
        lines = diagnose(
            DiagnosisInputs(
                server=server,
                client_output_tokens_per_s=tv.client_output_tokens_per_s,
                recent_client_series=tuple(self._client_series)[-30:],
                step_age_s=(t - current.start_s) if current else NAN,
                load_mode=current.mode if current else "closed",
                load_level=current.level if current else 0.0,
                inflight_requests=self._inflight,
                paused=self._paused,
            )
        )
        self._diagnosis = tuple(line.text for line in lines)
        keys = {line.key for line in lines}
        for line in lines:
            if line.key not in self._active_diagnosis:
                self.add_event(t, "diagnosis", line.text)
        self._active_diagnosis = keys

    def _throughput_view(self, now: float) -> ThroughputView:
        span = min(self.config.throughput_window_s, max(now - self.start_s, 1e-9))
        recs = self._window(now, span)
        ok = [r for r in recs if r.ok]
        good = (
            sum(1 for r in ok if meets_slo(r, self.config.slo))
            if not self.config.slo.empty
            else None
        )
        base = self._baseline_point(now)
        return ThroughputView(
            client_output_tokens_per_s=sum(r.output_token_count for r in ok) / span
            if self._recent
            else NAN,
            server_generation_tokens_per_s=self._server_generation(now, span),
            requests_per_s=len(ok) / span if self._recent else NAN,
            goodput_requests_per_s=(good / span) if good is not None else NAN,
            error_fraction=(len(recs) - len(ok)) / len(recs) if recs else NAN,
            client_series=tuple(self._client_series),
            server_series=tuple(self._server_series),
            mark_offsets=self._mark_offsets(),
            baseline_output_tokens_per_s=base.output_tokens_per_s if base else NAN,
        )

    def _mark_offsets(self) -> tuple[int, ...]:
        first = self._samples_taken - len(self._client_series)
        return tuple(s - first - 1 for s in self._mark_samples if s - first - 1 >= 0)

    def _latency_view(self, now: float) -> LatencyView:
        ok = [r for r in self._window(now, self.config.window_s) if r.ok]
        return LatencyView(
            ttft=percentiles([r.ttft_s for r in ok]),
            tpot=percentiles([r.tpot_s for r in ok]),
            itl=percentiles(pooled_itl_s(ok)),
            e2el=percentiles([r.e2el_s for r in ok]),
            slo=self.config.slo,
            ttft_p90_series=tuple(self._ttft_series),
            e2el_p90_series=tuple(self._e2el_series),
            tpot_p90_series=tuple(self._tpot_series),
        )

    def _server_generation(self, now: float, span_s: float) -> float:
        """The server's generation tokens/s over the client's throughput span (its last scrape's
        own window when no scrape falls inside the span)."""
        rate = self._server_gen.over(now, span_s)
        return rate if rate is not None else self._server_view(now).generation_tokens_per_s

    def _server_view(self, now: float) -> ServerView:
        if self._server_raw is None:
            view = ServerView()
        else:
            view = self._hold_last_known(server_view_from(self._server_raw, self._tokens_per_seq()))
        stale = now - self._server_at_s if self._server_at_s is not None else NAN
        down = self._down_since_s - self.start_s if self._down_since_s is not None else None
        return _replace_server(
            view,
            up=self._down_since_s is None,
            down_since_s=down,
            no_metrics=self._no_metrics and self._server_raw is None,
            stale_s=stale,
            error=self._server_error,
            kv_series=tuple(self._kv_series),
        )

    def _hold_last_known(self, view: ServerView) -> ServerView:
        """Window means of rare events (a request finishing inside a 1 s scrape window) keep
        their last value instead of blinking to "unknown" between completions."""
        changes = {}
        for name in HELD_FIELDS:
            value = getattr(view, name)
            if math.isnan(value):
                if name in self._last_known:
                    changes[name] = self._last_known[name]
            else:
                self._last_known[name] = value
        return _replace_server(view, **changes) if changes else view

    def _tokens_per_seq(self) -> float:
        """Mean prompt + output tokens of the last requests (nan before any)."""
        sizes = [
            r.prompt_tokens + r.output_tokens
            for r in list(self._recent)[-200:]
            if r.ok and r.prompt_tokens is not None and r.output_tokens is not None
        ]
        return sum(sizes) / len(sizes) if sizes else NAN

    def _header_view(self, now: float, server: ServerView) -> HeaderView:
        step = self._steps[-1] if self._steps else None
        if not server.up:
            state = "server down"
        elif self._paused:
            state = "paused"
        else:
            state = "sweeping" if self._sweeping else "running"
        return HeaderView(
            endpoint=self.config.endpoint,
            model=self._meta["model"],
            backend=self._meta["backend"],
            backend_version=self._meta["version"],
            load_mode=step.mode if step else "closed",
            load_level=step.level if step else 0.0,
            state=state,
            elapsed_s=float(int(now - self.start_s)),
            inflight_requests=self._inflight,
            baseline_step=self._baseline,
        )

    def _step_point(self, step: LiveStep, now: float | None) -> StepPoint:
        at = now if now is not None else (step.end_s or step.start_s)
        return step_point(step, at, self.config.slo)

    def _baseline_point(self, now: float) -> StepPoint | None:
        if self._baseline is None:
            return None
        return self._step_point(self._steps[self._baseline], now)

    def _knee_view(self, now: float) -> KneeView:
        points = tuple(p for p in self.step_points(now) if p.mode == "closed")
        knee = knee_of(points)
        return KneeView(
            steps=points,
            knee_level=knee["concurrency"] if knee else None,
            slo_limit_level=slo_limit_of(points),
            baseline_index=self._baseline,
        )


def _replace_server(view: ServerView, **changes: Any) -> ServerView:
    from dataclasses import replace

    return replace(view, **changes)


def _fmt_level(mode: str, level: float) -> str:
    return f"c={level:g}" if mode == "closed" else f"{level:g} req/s"
