"""UI test data made the way production makes it.

Server snapshots come from a real vLLM 0.32 ``/metrics`` capture (``tests/fixtures``) with the
values of a few series set per moment, parsed by infmon's own exposition parser and canonical
mapping (rates from two pages, as a scrape gives them): a pane can only show what a real page
can produce. Request records are shaped like the HTTP client's; load windows are built from
them with the engine's own histogram code; steps go through the real step book. The only
double is the load engine, which records what the controller asked of it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from infmon.clock import FakeClock
from infmon.commands.live import LiveController
from infmon.commands.wiring import RunWiring, wire_session
from infmon.engine.controller import Target, Totals
from infmon.engine.types import RecordBatch
from infmon.journal.events import JournalEvent
from infmon.model.base.loghist import LogHistogram
from infmon.model.live.dial import DialState, LoadDial
from infmon.model.live.session import Session, SessionConfig
from infmon.model.records.measures import SLO
from infmon.model.records.request import RequestRecord
from infmon.model.records.window import LatencyHists, LoadWindow
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.span import CLOSED, Level
from tests.enginekit.pages import ServerFeed


def record(i: int, sent: float, level: int, tokens: int = 64, step: int = 0) -> RequestRecord:
    ttft = 0.08 + 0.004 * level + 0.01 * (i % 5)
    gap = 0.015 + 0.0005 * level
    chunks = tuple(sent + ttft + k * gap for k in range(tokens))
    return RequestRecord(
        i,
        sent,
        chunks,
        chunks[-1] + 0.0001,
        prompt_tokens=128,
        output_tokens=tokens,
        concurrency=level,
        step=step,
    )


def ended(r: RequestRecord, end_s: float) -> RequestRecord:
    """``r`` moved in time so that it ends at ``end_s``."""
    shift = end_s - r.end_s
    return replace(
        r,
        sent_s=r.sent_s + shift,
        chunk_times_s=tuple(t + shift for t in r.chunk_times_s),
        end_s=end_s,
    )


def window_of(
    records: list[RequestRecord],
    t0: float,
    t1: float,
    inflight: int,
    step: int = 0,
    streams: list[RequestRecord] | None = None,
) -> LoadWindow:
    """The window a worker would send for these finished records (the engine's histograms);
    its tokens are the chunks of ``streams`` (every stream then open) that arrived in it."""
    hists = LatencyHists()
    for r in records:
        hists.add(r)
    tokens = sum(
        np.count_nonzero((np.asarray(r.chunk_times_s) >= t0) & (np.asarray(r.chunk_times_s) < t1))
        for r in (records if streams is None else streams)
    )
    lag = LogHistogram()
    lag.add([0.0008] * 20)
    return LoadWindow(
        worker_id=0,
        t0=t0,
        t1=t1,
        sent=len(records),
        finished=len(records),
        failed=0,
        cancelled=0,
        inflight=inflight,
        tokens=float(tokens),
        inflight_area_s=inflight * (t1 - t0),
        inflight_by_step=((step, inflight),) if inflight else (),
        sent_by_step=(),
        ttft=hists.ttft.sparse(),
        tpot=hists.tpot.sparse(),
        itl=hists.itl.sparse(),
        e2el=hists.e2el.sparse(),
        lag=lag.sparse(),
    )


class FakeRecorder:
    def __init__(self, path: str = "/tmp/infmon-fake-session") -> None:
        self.reports: list[str | None] = []
        self.path = path

    def write_report(self, screenshot_svg: str | None) -> str:
        self.reports.append(screenshot_svg)
        return self.path


class RecordingEngine:
    """The load engine's control surface, recording each call (no load runs in UI tests)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.config: Any = None

    async def open(self) -> None:
        self.calls.append(("open", None))

    async def wait_ready(self) -> Target:
        return Target("Qwen/Qwen2.5-7B-Instruct", "completions", True, True)

    def set_level(self, step: int, level: Level, warmup_until_s: float) -> None:
        self.calls.append(("set_level", (step, level.mode, level.value)))

    def pause(self) -> None:
        self.calls.append(("pause", None))

    def resume(self, warmup_until_s: float) -> None:
        self.calls.append(("resume", None))

    async def stop(self, cancel: bool = True) -> Totals:
        self.calls.append(("stop", cancel))
        return Totals()


class MemoryJournal:
    """The journal's write surface, in memory (what the controller journals, in order)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def write_event(self, kind: str, **payload: Any) -> None:
        self.events.append((kind, payload))

    def write(self, event: JournalEvent) -> None:
        self.write_event(event.kind, **event.to_payload())

    def write_record(
        self, record: RequestRecord, worker: int = 0, endpoint: int | None = None
    ) -> None:
        pass

    def write_scrape(self, snap: ServerSnapshot) -> None:
        pass


class UiController(LiveController):
    """The real controller; its run only applies the first step (tests tick it themselves), and
    not even that on a session already holding a level (``populated_session``)."""

    async def run(self) -> None:
        if self.session.ledger.book.current is None:
            self.start()


def make_controller(
    session: Session,
    clock: FakeClock,
    *,
    mode: str = CLOSED,
    concurrency: int = 1,
    rate: float = 1.0,
    paused: bool = True,
    step_s: float = 30.0,
) -> UiController:
    journal: Any = MemoryJournal()
    wiring = RunWiring(journal, session.ledger, session.health)
    dial = LoadDial(DialState(mode, concurrency, rate, paused), step_s=step_s)
    engine: Any = RecordingEngine()
    return UiController(
        engine, session, wiring, journal, dial, clock, warmup_s=session.config.step_warmup_s
    )


def new_session(clock: FakeClock, slo: SLO | None = None) -> Session:
    cfg = SessionConfig(endpoint="http://127.0.0.1:8000", slo=slo or SLO(), step_warmup_s=2.0)
    return Session(cfg, start_s=clock.now())


def populated_session(
    clock: FakeClock,
    *,
    spec: bool = False,
    steps=(1, 2, 4, 8, 16),
    step_s: float = 20.0,
    per_s: dict[int, int] | None = None,
) -> Session:
    """A session that ran a sweep: deterministic records, a window and a scrape a second;
    ``per_s`` sets a level's requests a second (default ``min(level, 8)``: 8 at most run)."""
    session = new_session(clock, SLO(ttft_s=0.5))
    feed = ServerFeed()
    wiring = feeder(session, clock)
    session.set_paused(False, clock.now())
    i = 0
    for level in steps:
        start = clock.now()
        session.apply_steps(
            session.ledger.book.begin(Level(CLOSED, level), start, "sweep", 2.0), start
        )
        index = session.ledger.book.next_index - 1
        rate = (per_s or {}).get(level, min(level, 8))
        planned = [
            ended(record(i + n, 0.0, level, step=index), start + (n + 0.5) / rate)
            for n in range(int(step_s) * rate)
        ]
        i += len(planned)
        for sec in range(int(step_s)):
            t0 = clock.now()
            clock.advance(1.0)
            recs = planned[sec * rate : (sec + 1) * rate]
            wiring.records(RecordBatch(0, recs))
            wiring.window(window_of(recs, t0, clock.now(), level, index, streams=planned))
            snap = feed.scrape(
                clock.now(),
                running=min(level, 8),
                waiting=max(0, level - 8),
                kv=min(0.97, 0.06 * level),
                gen_per_s=60.0 * min(level, 8),
                spec=0.3 if spec else None,
            )
            wiring.snapshot(snap)
            session.snapshot(clock.now())
    session.add_mark(clock.now(), "switched to FP8")
    return session


def feeder(session: Session, clock: FakeClock) -> RunWiring:
    """What feeds a Session in the monitor: ``RunWiring`` (the ledger's one feeder) told the
    Session of each record, window and scrape (the journal kept in memory)."""
    return wire_session(RunWiring(MemoryJournal(), session.ledger, session.health), session, clock)


def deliver(session: Session, snap: ServerSnapshot, now: float) -> None:
    """A scrape as ``RunWiring`` hands it on: health first (its events said once), the
    ledger's evidence, then the session."""
    feeder(session, FakeClock(now)).snapshot(snap)
