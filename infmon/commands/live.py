"""The monitor's controller: one owner of the load level.

Keys and the sweep go through the ``LoadDial``; each ``DialChange`` is applied here, once, to
the load engine, the Session's step book and the journal. The engine's records and windows and
the server's snapshots reach the Session and the journal through ``RunWiring``. The UI calls
``press``/``mark``/``baseline`` and renders ``session.snapshot``; it never runs load code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from infmon.clock import Clock
from infmon.commands.wiring import RunWiring
from infmon.engine.controller import EngineError, LoadEngine, Target
from infmon.journal import JournalWriter
from infmon.journal.events import (
    BaselineSet,
    LevelSet,
    LoadTotals,
    Note,
    Paused,
    SearchMove,
    SearchStarted,
    SearchVerdict,
    TargetResolved,
)
from infmon.journal.safefile import write_text_atomic
from infmon.model.live.dial import DialChange, LoadDial, sweep_step
from infmon.model.live.session import Session
from infmon.model.search.live_search import LiveMove, LiveSearch
from infmon.model.search.search_json import SearchDoc
from infmon.model.steps.span import CLOSED, RATE, Level, StepEvent
from infmon.sources.errors import SourceError
from infmon.sources.thread import ScrapeThread

TICK_S = 0.25


class LiveController:
    """See the module docstring."""

    def __init__(
        self,
        engine: LoadEngine,
        session: Session,
        wiring: RunWiring,
        journal: JournalWriter,
        dial: LoadDial,
        clock: Clock,
        *,
        warmup_s: float,
        scrapes: ScrapeThread | None = None,
        sweep_at_start: bool = False,
        exporter: Any = None,
        search: Callable[[], LiveSearch] | None = None,
    ) -> None:
        self.engine, self.session, self.wiring = engine, session, wiring
        self.journal, self.dial, self.clock = journal, dial, clock
        self.warmup_s = warmup_s
        self.scrapes = scrapes
        self.sweep_at_start = sweep_at_start
        self.exporter = exporter
        """``--metrics-port``'s ``ClientExporter`` (stopped at shutdown), or None."""
        self.target: Target | None = None
        self._ended = False
        self.fatal: str | None = None
        """Why the load could never start (a server that is not OpenAI-compatible): the
        monitor ends with this line and status 2, as bench does."""
        self.quitting = False
        """The operator quit: a load that ends before it started is no error then."""
        self.on_fatal: Callable[[], None] | None = None
        self.new_search = search
        """``--search``: ``w`` runs a new load search (``model/search/live_search.py``)."""
        self.search: LiveSearch | None = None

    # ---- life ---------------------------------------------------------------------------------
    async def run(self) -> None:
        """Start the workers, apply the dial's level, then tick the sweep until cancelled."""
        if self.scrapes is not None:
            try:
                self.scrapes.start()
            except SourceError as exc:
                self.session.add_event(self.clock.now(), "error", f"server metrics: {exc.message}")
                self.scrapes = None
        await self.engine.open()
        self.start()
        try:
            self.target = await self.engine.wait_ready()
        except EngineError as exc:
            if self.quitting:  # the operator quit before the load found the model: no error
                return
            self.session.add_event(self.clock.now(), "error", f"the load cannot start: {exc}")
            self.fatal = f"infmon: error: {exc.message}"
            if self.on_fatal is not None:
                self.on_fatal()
            return
        self.session.set_server_info(model=self.target.model)
        self.target_resolved()
        if self.sweep_at_start:
            self.press("sweep")
        while True:
            await asyncio.sleep(TICK_S)
            self.tick()

    def start(self) -> None:
        """The first step: the dial's level, paused or not."""
        state = self.dial.state
        self._apply(DialChange(level=state.level, paused=state.paused), initial=True)

    def target_resolved(self) -> None:
        """Journal the target as the engine holds it and say how its load thread runs: at start,
        and again when a worker gives up real time (the report's line follows)."""
        t = self.engine.target
        if t is None:
            return
        caps = {"stream_options": t.stream_options, "vllm_fields": t.vllm_fields}
        urls = tuple(self.engine.urls)
        url = self.engine.config.url
        self.journal.write(
            TargetResolved(url, t.model, t.endpoint, caps, urls, t.load_thread or None)
        )
        if t.load_thread:
            self.session.add_event(self.clock.now(), "load", f"load thread: {t.load_thread}")

    def tick(self) -> None:
        now = self.clock.now()
        cur = self.session.current(now)
        if self.search is not None and not self.dial.state.paused:
            results = {r.index: r for r in self.session.ledger.results(now)}
            move = self.search.tick(results, now)
            if move is not None:
                self._search_move(move)
        if self.dial.sweeping and cur is not None:
            led = self.session.ledger
            change = self.dial.tick(sweep_step(cur, now), led.knee(now), led.slo_limit(now))
            if change is not None:
                self._apply(change)
        self._show_progress()
        status = getattr(self.journal, "status", None)
        self.session.set_journal_note(status().line() if status is not None else None)

    def _show_progress(self) -> None:
        if self.search is not None:
            self.session.set_sweep(self.search.progress())
            return
        now = self.clock.now()
        progress = self.dial.progress(sweep_step(self.session.current(now), now))
        self.session.set_sweep(
            None
            if progress is None
            else f"sweep {progress.index}/{progress.total} · c={progress.level} · "
            f"{math.ceil(progress.left_s)} s left"
        )

    async def shutdown(self) -> None:
        """End the step (the quit) and stop the load: in-flight streams are cancelled."""
        self.quitting = True
        self.end()
        totals = await self.engine.stop(cancel=True)
        if self.scrapes is not None:
            await self.scrapes.stop()
        if self.exporter is not None:
            self.exporter.stop()
        self.journal.write(
            LoadTotals(totals.sent, totals.succeeded, totals.failed, totals.cancelled)
        )

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        self._journal_steps(self.session.ledger.book.end(self.clock.now()))

    # ---- operator actions ---------------------------------------------------------------------
    def press(self, action: str) -> None:
        searching = action == "sweep" or self.search is not None
        if self.new_search is not None and searching and self._press_search(action):
            return
        rps = self.session.snapshot(self.clock.now()).throughput.requests_per_s
        change = self.dial.press(action, rps)
        if change is not None:
            self._apply(change)
        self._show_progress()

    def set_level(self, level: Level) -> None:
        """The palette's "set concurrency N": the operator's level, as a key's; a running
        sweep stops, and says so."""
        if self.search is not None:
            self._stop_search("search stopped: the operator took the dial")
        sweeping = self.dial.sweeping
        change = self.dial.set_level(level)
        if sweeping:
            change = replace(change, note="sweep stopped: the operator took the dial")
        self._apply(change)
        self._show_progress()

    def mark(self, note: str) -> None:
        self.session.add_mark(self.clock.now(), note)
        self.journal.write(Note("mark", note))

    def baseline(self) -> None:
        step = self.session.set_baseline(self.clock.now())
        self.journal.write(BaselineSet(step))

    @property
    def paused(self) -> bool:
        return self.dial.state.paused

    # ---- the load search (--search) -----------------------------------------------------------
    def _press_search(self, action: str) -> bool:
        """``w`` starts or stops the search; any other key stops it and acts (False)."""
        if action != "sweep":
            self._stop_search("search stopped: the operator took the dial")
            return False
        if self.search is not None:
            self._stop_search("search stopped by the operator")
            return True
        assert self.new_search is not None
        self.search = search = self.new_search()
        spec = search.spec
        self.journal.write(SearchStarted(spec.goal, spec.lo, spec.hi, spec.budget))
        if self.dial.state.paused:
            self._apply(self.dial.press("pause") or DialChange(paused=False))
        self._search_move(search.start())
        return True

    def _write_search(self, doc: SearchDoc) -> None:
        """The verdict journalled and, as bench writes it, ``search.json`` in the session."""
        self.journal.write(SearchVerdict(doc))
        session_dir = getattr(self.journal, "session_dir", None)
        if session_dir is not None:
            text = json.dumps(doc, indent=2, allow_nan=False) + "\n"
            with contextlib.suppress(OSError):  # the journal says it; a full disk is reported there
                write_text_atomic(Path(session_dir) / "search.json", text)

    def _stop_search(self, note: str) -> None:
        if self.search is not None:
            self.session.set_search(self.search.spec.goal, self.search.frontier(note))
        self.search = None
        now = self.clock.now()
        self.session.add_event(now, "sweep", note)
        self.journal.write(Note("sweep", note))
        self.session.set_sweep(None)

    def _search_move(self, move: LiveMove) -> None:
        search = self.search
        assert search is not None
        self.session.set_search(
            search.spec.goal, search.frontier(move.note if move.verdict else "")
        )
        if move.verdict is not None:
            self.search = None
            self._write_search(search.doc(move.verdict))
            if move.hold is not None:
                level = Level(CLOSED, move.hold) if search.spec.integer else Level(RATE, move.hold)
                self._apply(
                    replace(self.dial.set_level(level, origin="hold"), note=move.note, verdict=True)
                )
            else:
                self._apply(DialChange(note=move.note, verdict=True))
            self.session.set_sweep(None)
            return
        assert move.level is not None
        level = Level(CLOSED, move.level) if search.spec.integer else Level(RATE, move.level)
        change = self.dial.set_level(level, origin="search")
        self._apply(replace(change, note=move.note) if move.probe else change)
        search.started(self.session.ledger.book.next_index - 1, move.probe)
        if move.probe:
            self.journal.write(SearchMove(move.level, move.note))
        self.session.set_sweep(search.progress())

    # ---- applying a change --------------------------------------------------------------------
    def _apply(self, change: DialChange, initial: bool = False) -> None:
        now = self.clock.now()
        ledger, events = self.session.ledger, []
        book, paused = ledger.book, self.dial.state.paused
        if change.level is not None:
            events += book.begin(change.level, now, change.origin, self.warmup_s, ledger.inflight())
            index = book.next_index - 1
            self.engine.set_level(index, change.level, now + self.warmup_s)
            if paused:
                events += book.pause(now)
            self.journal.write(LevelSet(change.level.mode, change.level.value, change.origin))
        if change.paused is not None:
            if change.paused:
                events += book.pause(now)
                self.engine.pause()
            else:
                events += book.resume(now, self.warmup_s, ledger.inflight())
                self.engine.resume(now + self.warmup_s)
            if not initial:
                self.journal.write(Paused(change.paused))
            self.session.set_paused(change.paused, now)
        self._journal_steps(events)
        if change.note:
            self.session.add_event(now, "sweep", change.note)
            if change.verdict:
                self.session.set_verdict(change.note)
            self.journal.write(Note("sweep", change.note))

    def _journal_steps(self, events: list[StepEvent]) -> None:
        self.session.apply_steps(events, self.clock.now())
        self.wiring.step_events(events)

    @property
    def inflight(self) -> int | None:
        return self.session.windows.inflight
