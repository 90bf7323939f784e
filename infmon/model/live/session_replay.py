"""A recorded session as it unfolded: the journal's records, step events, marks and scrapes put
back in time order and fed to a ``Session``, the same one the live monitor draws from, up to a
cursor. ``Replay.at(t)`` is the screen as it was at ``t``. Its step ledger is fed as the live
run's wiring fed it (records, windows, scrapes, and the journal's clean starts), so the knee
table's figures and the knee are named when the live pane named them.

The journal keeps finished requests, not the engine's 250 ms windows, so the windows are made
again from the records (tokens as their chunks arrived, in-flight requests per step, the
latency histograms of the requests that finished in each window), as the engine built them.
Moving the cursor forward feeds what lies between; moving it back replays from the start.
"""

from __future__ import annotations

import bisect
import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infmon.model.live.session import Session, SessionConfig
from infmon.model.records.request import RequestRecord
from infmon.model.records.window import LatencyHists, LoadWindow
from infmon.model.server.snapshot import ServerSnapshot, SpecDecode, WindowStat
from infmon.model.steps.evidence import ServerSample
from infmon.model.steps.gathering import ClientCheck
from infmon.model.steps.span import EVENT_KINDS, StepEvent
from infmon.model.steps.step_levels import spec_counters

WINDOW_S = 0.25
"""The engine's window period."""
FEED_PERIOD_S = 1.0
"""Fed a second at a time, each second closed into the series as the live render would."""
CHECKPOINT_S = 20.0
"""A copy of the session is kept every this many seconds fed, so going back replays at most
this much (a copy costs about what feeding a few seconds does)."""


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def snapshot_of(t: float, d: Mapping[str, Any]) -> ServerSnapshot:
    """A journal scrape (``infmon scrape --json`` keys) as the ``ServerSnapshot`` it was: its
    gauges, counters and rates, the server's configuration, latencies and speculative decoding
    (what the live panes read); a key absent or of the wrong type is the field's default."""

    def num(key: str) -> float | None:
        return _num(d.get(key))

    def whole(key: str) -> int | None:
        v = _num(d.get(key))
        return None if v is None else int(v)

    return ServerSnapshot(
        timestamp_s=t,
        backend=_text(d.get("backend")),
        backend_version=_text(d.get("backend_version")),
        models=tuple(str(m) for m in models) if isinstance(models := d.get("models"), list) else (),
        running=num("running"),
        waiting=num("waiting"),
        kv_cache_usage=num("kv_cache_usage"),
        prefix_cache_hit_rate=num("prefix_cache_hit_rate"),
        prefix_cache_hits_total=num("prefix_cache_hits_total"),
        prefix_cache_queries_total=num("prefix_cache_queries_total"),
        preemptions_total=num("preemptions_total"),
        preemptions_per_s=num("preemptions_per_s"),
        api_server_cpu_s_total=num("api_server_cpu_s_total"),
        api_server_cpu_cores=num("api_server_cpu_cores"),
        prompt_tokens_total=num("prompt_tokens_total"),
        generation_tokens_total=num("generation_tokens_total"),
        prompt_tokens_per_s=num("prompt_tokens_per_s"),
        generation_tokens_per_s=num("generation_tokens_per_s"),
        requests_finished_per_s=num("requests_finished_per_s"),
        latency_s=_latencies(d.get("latency_s")),
        spec_decode=_spec(spec) if isinstance(spec := d.get("spec_decode"), Mapping) else None,
        cache_config=_texts(d.get("cache_config")),
        max_model_len=whole("max_model_len"),
        kv_capacity_tokens=whole("kv_capacity_tokens"),
        kv_block_size_tokens=whole("kv_block_size_tokens"),
        kv_num_gpu_blocks=whole("kv_num_gpu_blocks"),
        window_s=num("window_s"),
    )


def _text(x: object) -> str | None:
    return x if isinstance(x, str) else None


def _texts(x: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in x.items()} if isinstance(x, Mapping) else {}


def _latencies(x: object) -> dict[str, WindowStat]:
    if not isinstance(x, Mapping):
        return {}
    return {
        str(k): WindowStat(
            _num(v.get("count")), _num(v.get("mean")), _num(v.get("p50")), _num(v.get("p90")),
            _num(v.get("p99")),
        )
        for k, v in x.items()
        if isinstance(v, Mapping)
    }  # fmt: skip


def _spec(d: Mapping[str, Any]) -> SpecDecode:
    def series(key: str) -> tuple[float, ...]:
        v = d.get(key)
        return tuple(x for x in map(_num, v) if x is not None) if isinstance(v, list) else ()

    return SpecDecode(
        drafts_total=_num(d.get("drafts_total")),
        draft_tokens_total=_num(d.get("draft_tokens_total")),
        accepted_tokens_total=_num(d.get("accepted_tokens_total")),
        acceptance_rate=_num(d.get("acceptance_rate")),
        mean_acceptance_length=_num(d.get("mean_acceptance_length")),
        accepted_per_position_total=series("accepted_per_position_total"),
        acceptance_per_position=series("acceptance_per_position"),
    )


def _stop(r: RequestRecord) -> float:
    """When the request left the client (its end, else its last chunk, else its send)."""
    if not math.isnan(r.end_s):
        return r.end_s
    return r.chunk_times_s[-1] if r.chunk_times_s else r.sent_s


def _chunk_tokens(r: RequestRecord) -> np.ndarray:
    """Tokens per chunk (1 each where the server did not say)."""
    n = len(r.chunk_times_s)
    return np.asarray(r.chunk_tokens if len(r.chunk_tokens) == n else np.ones(n), float)


def windows_of(records: Sequence[RequestRecord], t0: float, t1: float) -> list[LoadWindow]:
    """The engine's windows over ``[t0, t1)`` made again from its finished records."""
    if not records:
        return []
    sent = np.array([r.sent_s for r in records])
    stop = np.array([_stop(r) for r in records])
    step = np.array([r.step for r in records])
    chunk_t = np.concatenate([np.asarray(r.chunk_times_s, float) for r in records])
    chunk_n = np.concatenate([_chunk_tokens(r) for r in records])
    edges = np.arange(t0, t1 + WINDOW_S, WINDOW_S)
    tokens, _ = np.histogram(chunk_t, bins=edges, weights=chunk_n)
    by_stop = sorted(range(len(records)), key=lambda i: stop[i])
    stops_sorted = [stop[i] for i in by_stop]
    out = []
    for k in range(len(edges) - 1):
        a, b = float(edges[k]), float(edges[k + 1])
        lo, hi = bisect.bisect_left(stops_sorted, a), bisect.bisect_left(stops_sorted, b)
        done = [records[by_stop[i]] for i in range(lo, hi)]
        live = (sent <= b) & (stop > b)
        area = float(np.clip(np.minimum(stop, b) - np.maximum(sent, a), 0.0, None).sum())
        out.append(_window(a, b, done, float(tokens[k]), int(live.sum()), area, step, sent, live))
    return out


def _window(
    a: float,
    b: float,
    done: list[RequestRecord],
    tokens: float,
    inflight: int,
    area: float,
    step: np.ndarray,
    sent: np.ndarray,
    live: np.ndarray,
) -> LoadWindow:
    hists = LatencyHists()
    for r in done:
        hists.add(r)
    steps_live, n_live = np.unique(step[live], return_counts=True)
    steps_sent, n_sent = np.unique(step[sent < b], return_counts=True)
    return LoadWindow(
        worker_id=0,
        t0=a,
        t1=b,
        sent=int(((sent >= a) & (sent < b)).sum()),
        finished=sum(1 for r in done if r.ok),
        failed=sum(1 for r in done if not r.ok and r.error_kind != "cancelled"),
        cancelled=sum(1 for r in done if r.error_kind == "cancelled"),
        inflight=inflight,
        tokens=tokens,
        inflight_area_s=area,
        inflight_by_step=tuple(zip(map(int, steps_live), map(int, n_live), strict=True)),
        sent_by_step=tuple(zip(map(int, steps_sent), map(int, n_sent), strict=True)),
        ttft=hists.ttft.sparse(),
        tpot=hists.tpot.sparse(),
        itl=hists.itl.sparse(),
        e2el=hists.e2el.sparse(),
    )


def _ledger_window(s: Session, w: LoadWindow) -> None:
    """A window's tokens, in-flight area and sends into the steps' figures (a running step's
    tok/s and whether it held enough requests to judge)."""
    s.ledger.add_window(w.t0, w.t1, w.tokens, w.inflight_area_s, worker=w.worker_id)
    for step, sent in w.sent_by_step:
        s.ledger.note_sent(step, sent)


@dataclass(frozen=True, slots=True)
class Stop:
    """A place the cursor jumps to with ``[`` / ``]``: a step's start or a mark."""

    t: float
    label: str


class Replay:
    """The session's items in time order; ``at(t)`` feeds a ``Session`` up to ``t``."""

    def __init__(
        self,
        records: Iterable[RequestRecord],
        events: Iterable[Mapping[str, Any]],
        scrapes: Iterable[Mapping[str, Any]],
        config: SessionConfig,
        start_s: float | None = None,
    ) -> None:
        self.config = config
        recs = list(records)
        items: list[tuple[float, int, str, Any]] = []
        stops: list[Stop] = []
        for e in events:
            t = _num(e.get("t"))
            if t is None:
                continue
            kind = EVENT_KINDS.get(str(e.get("kind")))
            if kind is not None and (ev := StepEvent.from_payload(kind, e)) is not None:
                stats = e.get("stats")
                check = ClientCheck.from_payload(stats) if isinstance(stats, Mapping) else None
                items.append((t, 0, "step", (ev, check)))
                if ev.kind == "begin":
                    stops.append(Stop(t, f"step {ev.index}"))
            elif e.get("kind") == "mark":
                note = str(e.get("note") or e.get("label") or "")
                items.append((t, 1, "mark", note))
                stops.append(Stop(t, f"mark {note}".strip()))
            elif e.get("kind") == "sweep" and e.get("note"):  # "sweep stopped: …" as live
                items.append((t, 1, "sweep", str(e.get("note"))))
        for s in scrapes:
            t, snap = _num(s.get("t")), s.get("snap")
            if t is not None and isinstance(snap, Mapping):
                sample = ServerSample.from_dict(t, snap)
                items.append((t, 2, "scrape", (snapshot_of(t, snap), sample)))
        times = [t for t, *_ in items] + [r.sent_s for r in recs] + [_stop(r) for r in recs]
        self.start_s = start_s if start_s is not None else (min(times) if times else 0.0)
        self.end_s = max(times) if times else self.start_s
        for r in recs:
            items.append((_stop(r), 3, "record", r))
        for w in windows_of(recs, self.start_s, self.end_s + WINDOW_S):
            items.append((w.t1, 4, "window", w))
        items.sort(key=lambda x: (x[0], x[1]))
        self._items = items
        self._times = [x[0] for x in items]
        self.stops = tuple(sorted(stops, key=lambda s: s.t))
        self._session = self._fresh()
        self._fed = 0
        self._at = self.start_s
        self._checkpoints: dict[int, tuple[Session, int]] = {}

    def _fresh(self) -> Session:
        return Session(self.config, start_s=self.start_s)

    def at(self, t: float) -> Session:
        """The session as it stood at ``t`` (clamped to the recording)."""
        t = min(max(t, self.start_s), self.end_s)
        if t < self._at:
            self._rewind(t)
        s = self._session
        while self._at < t:
            whole = math.floor((self._at - self.start_s) / FEED_PERIOD_S + 1e-9) + 1
            self._at = min(t, self.start_s + whole * FEED_PERIOD_S)  # on the second
            end = bisect.bisect_right(self._times, self._at)
            for _t, _o, kind, obj in self._items[self._fed : end]:
                self._feed(s, kind, obj, _t)
            self._fed = end
            s.snapshot(self._at)
            k = round((self._at - self.start_s) / CHECKPOINT_S)
            on_mark = math.isclose(self._at, self.start_s + k * CHECKPOINT_S, abs_tol=1e-6)
            if k > 0 and on_mark and k not in self._checkpoints:
                self._checkpoints[k] = (copy.deepcopy(s), self._fed)
        return s

    def _rewind(self, t: float) -> None:
        """Back to the last checkpoint at or before ``t`` (else the start)."""
        k = int((t - self.start_s) // CHECKPOINT_S)
        while k > 0 and k not in self._checkpoints:
            k -= 1
        if k > 0:  # the copy was taken at start + k·CHECKPOINT_S, fed up to there
            saved, fed = self._checkpoints[k]
            self._session, self._fed = copy.deepcopy(saved), fed
            self._at = self.start_s + k * CHECKPOINT_S
        else:
            self._session, self._fed, self._at = self._fresh(), 0, self.start_s

    @staticmethod
    def _feed(s: Session, kind: str, obj: Any, t: float) -> None:
        """One item into the session and its step ledger, as the live run's wiring fed them
        (``infmon.commands.wiring.RunWiring``): the ledger first, then the session. The steps'
        clean starts are the journal's ``step_settle`` events, not worked out again."""
        if kind == "record":
            s.ledger.add_record(obj)
            s.add_record(obj)
        elif kind == "window":
            _ledger_window(s, obj)
            s.add_window(obj)
        elif kind == "scrape":
            snap, sample = obj
            s.ledger.add_scrape(snap.timestamp_s, sample, spec_counters(snap))
            s.add_server(snap, t)
        elif kind == "mark":
            s.add_mark(t, obj)
        elif kind == "sweep":
            s.add_event(t, "sweep", obj)
        else:
            ev, check = obj
            s.apply_steps([ev], t)
            if check is not None:  # the client's check as the live run recorded it
                s.ledger.set_check(ev.index, check)
            if ev.kind != "end":  # between two steps the load is not paused
                cur = s.ledger.book.current
                s.set_paused(cur is None or cur.paused, t)

    def next_stop(self, t: float) -> float:
        """The first stop after ``t`` (else the end)."""
        later = [s.t for s in self.stops if s.t > t + 1e-6]
        return later[0] if later else self.end_s

    def previous_stop(self, t: float) -> float:
        """The last stop before ``t`` (else the start)."""
        earlier = [s.t for s in self.stops if s.t < t - 1e-6]
        return earlier[-1] if earlier else self.start_s
