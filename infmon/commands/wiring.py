"""What bench and the monitor both do with the load engine's data and the server's scrapes:
the journal, the step ledger and the server's health see every record, window, scrape and
step change, in the order they happen, on the controller's loop. This is the ledger's only
feeder: the live Session reads the same ledger and hears of the rest through the callbacks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from infmon.clock import Clock
from infmon.engine.loss import WorkerLoss
from infmon.engine.protocol import Window
from infmon.engine.restart import WorkerJoin
from infmon.engine.types import RecordBatch
from infmon.journal import JournalWriter
from infmon.model.base.loghist import LogHistogram
from infmon.model.live.session import Session
from infmon.model.records.request import RequestRecord
from infmon.model.records.survivors import LossMark, SurvivorCheck
from infmon.model.server.health import HealthEvent, ServerHealth
from infmon.model.server.snapshot import ServerSnapshot, SourceState
from infmon.model.steps.gathering import ClientCheck
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import JOURNAL_KIND, StepEvent


class RunWiring:
    """Feeds the journal, the ledger and the health state machine; counts errors by kind."""

    def __init__(
        self, journal: JournalWriter, ledger: StepLedger, health: ServerHealth | None = None
    ) -> None:
        self.journal = journal
        self.ledger = ledger
        self.health = health or ServerHealth()
        self.errors: Counter[str] = Counter()
        self.done: Counter[int] = Counter()
        self.failed: Counter[int] = Counter()
        self.on_record: list[Callable[[RequestRecord], None]] = []
        self.on_batch: list[Callable[[RecordBatch], None]] = []
        """Whole batches (the exporter: one numpy pass a batch)."""
        self.on_lost: list[Callable[[WorkerLoss], None]] = []
        self.on_window: list[Callable[[Window], None]] = []
        self.on_snapshot: list[Callable[[ServerSnapshot], None]] = []
        self.on_health: list[Callable[[HealthEvent], None]] = []
        self.on_settle: list[Callable[[list[StepEvent]], None]] = []
        """A step's clean start, said by the ledger from a window (journalled already)."""
        self._sent: dict[int, dict[int, int]] = {}
        self.survivors = SurvivorCheck()
        """After a worker loss: were the workers left saturated by their new share?"""

    def records(self, batch: RecordBatch) -> None:
        w, eps, write = batch.worker_id, batch.endpoints, self.journal.write_record
        for i, r in enumerate(batch.records):
            write(r, w, eps[i] if eps is not None else None)
            self.ledger.add_record(r)
            if r.ok:
                self.done[r.step] += 1
            elif r.error_kind != "cancelled":
                self.failed[r.step] += 1
                if r.error_message:
                    self.errors[f"{r.error_kind}: {r.error_message}"] += 1
            for f in self.on_record:
                f(r)
        for g in self.on_batch:
            g(batch)

    def lost(self, loss: WorkerLoss) -> None:
        """A lost worker: journalled (the report flags its step), and told to the live view."""
        self.journal.write_event("worker_lost", **loss.payload())
        self.ledger.forget_worker(loss.worker_id)
        self.survivors.lost(LossMark(loss.t, loss.worker_id, loss.live_workers))
        for f in self.on_lost:
            f(loss)

    def joined(self, join: WorkerJoin) -> None:
        """A replacement for a lost worker took its share (or could not): journalled, so the
        report says it beside the loss."""
        self.journal.write_event("worker_replaced", **join.payload())

    def window(self, w: Window) -> None:
        lag = LogHistogram.from_sparse(w.lag) if w.lag is not None else None
        late = LogHistogram.from_sparse(w.lateness) if w.lateness is not None else None
        self.ledger.add_window(
            w.t0, w.t1, w.tokens, w.inflight_area_s, lag, late, w.worker_id,
            (w.cpu_s, w.runq_s, w.runs, w.cpu_users),
        )  # fmt: skip
        if self.survivors.active:
            self.survivors.window(
                self._measuring((w.t0 + w.t1) / 2),
                w.worker_id, w.t0, w.t1, lag, w.cpu_s, w.runq_s, w.runs,
            )  # fmt: skip
        self._sent[w.worker_id] = dict(w.sent_by_step)
        for step in {s for by in self._sent.values() for s in by}:
            self.ledger.note_sent(step, sum(by.get(step, 0) for by in self._sent.values()))
        settled = self.ledger.note_inflight(w.worker_id, w.t1, w.inflight_by_step)
        if settled:
            self.step_events(settled)
            for tell in self.on_settle:
                tell(settled)
        for f in self.on_window:
            f(w)

    def snapshot(self, snap: ServerSnapshot) -> None:
        if snap.state == SourceState.OK:
            self.journal.write_scrape(snap)
        for ev in self.health.observe(snap):
            self.journal.write_event(ev.kind, **ev.payload())
            for tell in self.on_health:
                tell(ev)
        self.ledger.add_server(snap)
        for f in self.on_snapshot:
            f(snap)

    def step_events(self, events: list[StepEvent]) -> None:
        """Journal step changes (the ledger has them already); a step's end carries its
        client check, which records alone cannot give back."""
        for ev in events:
            payload = ev.payload()
            if ev.kind == "end":
                payload["stats"] = self._client_check(ev.index).payload()
            self.journal.write_event(JOURNAL_KIND[ev.kind], **payload)

    def _client_check(self, index: int) -> ClientCheck:
        """The step's client check; marked client-bound when the workers left after a loss were
        saturated (beside any other cause the self-check found)."""
        check = self.ledger.client_check(index)
        bound = self.survivors.verdict(index)
        if bound:
            check = replace(check, late_cause=replace(check.late_cause, bound=bound))
            self.ledger.set_check(index, check)
        return check

    def _measuring(self, t: float) -> int | None:
        """The step whose measured time holds ``t`` (None: a warm-up, a pause)."""
        span = self.ledger.book.measuring(t)
        return span.index if span is not None else None


def wire_session(wiring: RunWiring, session: Session, clock: Clock) -> RunWiring:
    """The live Session hears everything the wiring fed the ledger (the Session's own ledger:
    ``RunWiring(journal, session.ledger, session.health)``)."""
    wiring.on_record.append(session.add_record)
    wiring.on_window.append(session.add_window)
    wiring.on_snapshot.append(lambda snap: session.add_server(snap, clock.now()))
    wiring.on_health.append(lambda ev: session.add_event(clock.now(), "server", ev.text))
    wiring.on_settle.append(lambda events: session.note_steps(events, clock.now()))
    wiring.on_lost.append(lambda loss: session.windows.forget(loss.worker_id))
    return wiring
