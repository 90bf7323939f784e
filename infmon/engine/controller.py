"""The controller's side of the load engine: starts workers, splits each level among them,
decodes what they send, knows what is in flight, and carries on when a worker is lost.

Used alike by ``infmon bench`` and the monitor. A level splits across the live workers as
⌊C/N⌋ streams each plus one more for the first C mod N ranks (closed loop), or λ/N requests/s
each with a seed per worker (Poisson arrivals split exactly so); gamma arrivals over several
workers are drawn here and dealt out (``infmon.engine.shares``). Records come back in the
journal's encoding and are decoded here, on the controller's loop, exactly as a report reads
them back, so the live view and every report see the same numbers. A worker that goes away
while the load runs (``infmon.engine.loss``) is an event; its in-flight requests become
``worker_lost`` records and its share of the level goes to the others at once; with a
``replacement`` (``--ray-restart``) a new worker is started for it and, once it has found the
model, the level is split over it too (``infmon.engine.restart``).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from infmon.clock import Clock
from infmon.config import Config
from infmon.engine import protocol as p
from infmon.engine.clocksync import ClockSync
from infmon.engine.cpuwatch import CpuWatch
from infmon.engine.link import InProcessLink, ProcessLink, WorkerLink
from infmon.engine.loss import WorkerLoss, lost_records
from infmon.engine.outbox import ENDPOINT_KEY
from infmon.engine.restart import REPLACEMENTS_PER_WORKER, Replacement, ReplacingEngine, WorkerJoin
from infmon.engine.shares import LOOKAHEAD_S, ArrivalDealer, split_level
from infmon.engine.spread import ROUND_ROBIN
from infmon.engine.types import EngineError, RecordBatch, Target, Totals, _Held
from infmon.engine.worker import host_id
from infmon.journal.codec import decode_record
from infmon.model.steps.span import CLOSED, RATE, REPLAY, Level

FEED_TICK_S = 0.25
"""How often the controller deals arrival times in a fed (gamma) rate step."""
REALTIME_NEWS_S = 0.5
"""``realtime_wait_s`` while a load thread is due back in real time and its worker has not yet
said so (the message is on its way)."""

__all__ = ["EngineError", "LoadEngine", "RecordBatch", "Target", "Totals", "split_level"]


class LoadEngine(ReplacingEngine):
    """See the module docstring. Callbacks run on the controller's loop."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        on_records: Callable[[RecordBatch], None],
        on_window: Callable[[p.Window], None] = lambda w: None,
        on_event: Callable[[str, str], None] = lambda kind, text: None,
        on_lost: Callable[[WorkerLoss], None] = lambda loss: None,
        workers: int = 1,
        in_process: bool = False,
        log_dir: Path | None = None,
        retry_s: float | None = None,
        client_factory: Callable[..., Any] | None = None,
        workload_factory: Callable[..., Any] | None = None,
        links: Sequence[WorkerLink] | None = None,
        urls: Sequence[str] = (),
        spread: str = ROUND_ROBIN,
        burstiness: float = 1.0,
        replacement: Replacement | None = None,
        on_joined: Callable[[WorkerJoin], None] = lambda join: None,
        on_load_thread: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.config, self.clock = config, clock
        self.on_records, self.on_window, self.on_event = on_records, on_window, on_event
        self.on_lost, self.on_joined, self.replacement = on_lost, on_joined, replacement
        self.on_load_thread = on_load_thread
        """A worker's load thread changed its scheduling (``target.load_thread`` is the new line)."""
        self.retry_s = retry_s
        self.urls, self.spread, self.burstiness = tuple(urls), spread, burstiness
        self.links: list[WorkerLink] = (
            list(links)
            if links is not None
            else [
                InProcessLink(i, client_factory, workload_factory)
                if in_process or client_factory is not None
                else ProcessLink(i, log_dir / f"worker-{i}.log" if log_dir else None)
                for i in range(workers)
            ]
        )
        self.target: Target | None = None
        self.ready = asyncio.Event()
        self.failure: EngineError | None = None
        self.lost: dict[int, WorkerLoss] = {}
        self._joining: dict[int, int] = {}
        """Replacements not carrying load (starting, or failed to): new worker → lost one."""
        self._join_failed: set[int] = set()
        self._replacements_left = REPLACEMENTS_PER_WORKER * len(self.links)
        self._budget = False
        """A ``limit_sends`` budget is in force (a replacement joins with none of it)."""
        self._readies: dict[int, p.Ready] = {}
        self._stopped: dict[int, p.Stopped] = {}
        self._stopped_event = asyncio.Event()
        self._stopping = False
        self._inflight: dict[int, int] = {}
        self._inflight_by_step: dict[int, dict[int, int]] = {}
        self._spent: set[int] = set()
        self._spent_event = asyncio.Event()
        self._replayed: set[int] = set()
        self._replayed_event = asyncio.Event()
        self._idle_event = asyncio.Event()
        """Set at every window (``wait_idle`` checks what it needs)."""
        self._window_end: dict[int, float] = {}
        self._window_totals: dict[int, Totals] = {}
        self._max_id: dict[int, int] = {}
        self._sync = ClockSync(self.links, clock)
        self._tasks: set[asyncio.Task[None]] = set()
        self._held: _Held | None = None
        self._paused = True
        self._dealer: ArrivalDealer | None = None
        self._dealing = False
        self.backoff: dict[int, str | None] = {}
        self._realtime_back: dict[int, float] = {}
        """Workers whose load thread left real time for a starvation: when it takes it again."""
        self.cpu_watch = (
            None if any(isinstance(k, InProcessLink) for k in self.links) else CpuWatch(clock)
        )
        """Names the machine's top CPU users when a worker starves (not beside in-process load)."""

    @property
    def workers(self) -> int:
        return len(self.links)

    @property
    def level(self) -> Level | None:
        """The level in force (the whole of it, across workers); None before the first."""
        return self._held.level if self._held is not None else None

    @property
    def paused(self) -> bool:
        return self._paused

    def realtime_wait_s(self) -> float:
        """Seconds until every load thread that left real time for a starvation takes it again
        (0: none is waiting to); at least ``REALTIME_NEWS_S`` while one is overdue, until its
        worker says it took it (or could not)."""
        if not self._realtime_back:
            return 0.0
        return max(REALTIME_NEWS_S, max(self._realtime_back.values()) - self.clock.now())

    @property
    def live(self) -> list[int]:
        """The workers carrying load (not lost, not a replacement still starting), by rank."""
        return [
            link.worker_id
            for link in self.links
            if link.worker_id not in self.lost and link.worker_id not in self._joining
        ]

    # ---- life -------------------------------------------------------------------------------
    async def start(self) -> Target:
        """Start every worker and wait until all have found the model (or one failed)."""
        await self.open()
        return await self.wait_ready()

    async def open(self) -> None:
        """Start the workers; control sent from now on is applied once they are ready."""
        seed = self.config.seed
        if self.cpu_watch is not None:
            self.cpu_watch.start()
        for rank, link in enumerate(self.links):
            await link.open(self._receive)
            link.send(
                p.Start(
                    link.worker_id,
                    rank,
                    self.workers,
                    self.config,
                    seed + rank,
                    self.retry_s,
                    urls=self.urls,
                    spread=self.spread,
                )
            )
            self._spawn(self._watch(link))

    async def wait_ready(self) -> Target:
        """Wait until every worker has found the model (``EngineError`` when one cannot)."""
        waits = [asyncio.ensure_future(self.ready.wait())]
        waits += [asyncio.ensure_future(link.closed.wait()) for link in self.links]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for w in waits:
            w.cancel()
        if self.failure is not None:
            raise self.failure
        if self.target is None:
            raise EngineError("worker", "the load worker ended before it started")
        return self.target

    async def stop(self, cancel: bool = True, timeout_s: float = 6.0) -> Totals:
        """Stop every worker (in-flight streams cancelled and recorded) and reap them."""
        self._stopping = True
        self._dealer = None
        if self.cpu_watch is not None:
            self.cpu_watch.stop()
        for link in self.links:
            link.send(p.Stop(cancel))
        pending = [link for link in self.links if not link.closed.is_set()]
        if pending and self.ready.is_set() and self.live:
            try:
                await asyncio.wait_for(self._stopped_event.wait(), timeout_s)
            except asyncio.TimeoutError:
                self.on_event("error", "a load worker did not stop in time")
        await asyncio.gather(*(link.close() for link in self.links), return_exceptions=True)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        return self.totals

    @property
    def totals(self) -> Totals:
        """Every worker's counts: from its ``Stopped``, or for a lost one from its windows and
        its ``worker_lost`` requests."""
        out = Totals()
        for s in self._stopped.values():
            out += Totals(s.sent, s.succeeded, s.failed, s.cancelled)
        for w, loss in self.lost.items():
            if w not in self._stopped:
                out += self._window_totals.get(w, Totals()) + Totals(failed=loss.inflight)
        return out

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, link: WorkerLink) -> None:
        """A worker whose link closes before it was told to stop is lost."""
        await link.closed.wait()
        w = link.worker_id
        if self._stopping or w in self._stopped or not self.ready.is_set():
            return
        reason = getattr(link, "lost_reason", None)
        text = await reason() if reason is not None else "its link closed"
        if w in self._joining:
            self._joined(w, text)
        else:
            self._lose(w, text)

    # ---- control ------------------------------------------------------------------------------
    def set_level(self, step: int, level: Level, warmup_until_s: float) -> None:
        if level.mode == REPLAY:
            if self.workers > 1:
                raise EngineError("replay", "a trace or schedule replays on one load worker")
            self._replayed.clear()
            self._replayed_event.clear()
        self._held = _Held(step, level, warmup_until_s)
        self._send_level()

    def _send_level(self) -> None:
        held, live = self._held, self.live
        if held is None or not live:
            return
        level = held.level
        fed = level.mode == RATE and self.config.arrival == "gamma" and len(live) > 1
        shares = split_level(level.value, level.mode, len(live))
        for w, share in zip(live, shares, strict=True):
            self.links[w].send(
                p.SetLevel(
                    held.step,
                    level.mode,
                    share,
                    self.config.max_concurrency,
                    self.config.arrival,
                    held.warmup_until_s,
                    total=level.value,
                    fed=fed,
                )
            )
        self._dealer = None
        if fed:
            self._start_dealing(self.clock.now())

    def _start_dealing(self, start_s: float) -> None:
        held = self._held
        assert held is not None
        seed = self.config.seed * 7919 + held.step
        self._dealer = ArrivalDealer(held.level.value, start_s, shape=self.burstiness, seed=seed)
        if not self._dealing:
            self._dealing = True
            self._spawn(self._deal_loop())

    async def _deal_loop(self) -> None:
        """Every tick, each live worker gets the arrivals of the next ``LOOKAHEAD_S``."""
        while not self._stopping:
            dealer, held = self._dealer, self._held
            if dealer is not None and held is not None and not self._paused:
                until = self.clock.now() + LOOKAHEAD_S
                for w, times in dealer.deal(until, self.live).items():
                    if times:
                        self.links[w].send(p.Arrivals(held.step, tuple(times)))
            await asyncio.sleep(FEED_TICK_S)

    def pause(self) -> None:
        self._paused = True
        self._broadcast(p.Pause())

    def resume(self, warmup_until_s: float) -> None:
        self._paused = False
        if self._held is not None:
            self._held.warmup_until_s = warmup_until_s
        if self._dealer is not None:
            self._start_dealing(self.clock.now())
        self._broadcast(p.Resume(warmup_until_s))

    def flush(self) -> None:
        """Close every worker's window now (a warm-up's end, a step's edge)."""
        self._broadcast(p.Flush())

    def limit_sends(self, n: int | None) -> None:
        """Send at most ``n`` more measured requests (split across workers), then pause; None
        lifts the limit. Set it before ``resume`` so no measured request slips past it."""
        self._spent.clear()
        self._spent_event.clear()
        self._budget = n is not None
        if n is None:
            self._broadcast(p.LimitSends(None))
            return
        live = self.live
        for w, share in zip(live, split_level(n, CLOSED, len(live)), strict=True):
            self.links[w].send(p.LimitSends(int(share)))

    async def arrivals_done(self) -> None:
        """Wait until the replay step's trace or schedule has sent its last arrival."""
        await self._replayed_event.wait()

    async def budget_spent(self) -> None:
        """Wait until every worker has sent its share of the ``limit_sends`` budget."""
        await self._spent_event.wait()

    async def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until every live worker says, in a window closed after this call, that nothing
        is in flight (a worker sends its records before its window: they have all arrived)."""
        since = self.clock.now()

        def idle() -> bool:
            return all(
                self._inflight.get(w, 1) == 0 and self._window_end.get(w, -math.inf) >= since
                for w in self.live
            )

        self.flush()
        deadline = None if timeout_s is None else since + timeout_s
        while not idle():
            self._idle_event.clear()
            left = None if deadline is None else deadline - self.clock.now()
            if left is not None and left <= 0:
                return False
            try:
                await asyncio.wait_for(self._idle_event.wait(), left)
            except asyncio.TimeoutError:
                return False
        return True

    def _broadcast(self, msg: object) -> None:
        for w in self.live:
            self.links[w].send(msg)

    # ---- what is in flight -------------------------------------------------------------------
    @property
    def inflight(self) -> int:
        return sum(self._inflight.values())

    def inflight_through(self, step: int) -> int:
        """Requests in flight that were sent in steps up to ``step``."""
        return sum(n for by in self._inflight_by_step.values() for s, n in by.items() if s <= step)

    # ---- a lost worker ------------------------------------------------------------------------
    def _lose(self, w: int, reason: str) -> None:
        """``w`` is gone: its in-flight requests become records, its share goes to the rest."""
        if w in self.lost:
            return
        now, held = self.clock.now(), self._held
        by_step = tuple(sorted(self._inflight_by_step.get(w, {}).items()))
        loss = WorkerLoss(
            w,
            now,
            reason,
            sum(n for _, n in by_step),
            by_step,
            len(self.live) - 1,
            held.step if held else None,
            held.level if held else None,
            now - self._window_end[w] if w in self._window_end else None,
            replacing=self.replacement is not None and self._replacements_left > 0,
        )
        self.lost[w] = loss
        sent_s = self._window_end.get(w, now)
        records = lost_records(
            loss, self._max_id.get(w, -1) + 1, sent_s, held.warmup_until_s if held else None
        )
        self._inflight[w], self._inflight_by_step[w] = 0, {}
        self._window_end[w] = math.inf
        self._realtime_back.pop(w, None)
        if records:
            self.on_records(RecordBatch(w, records))
        self.on_event("error", loss.text)
        self.on_lost(loss)
        self._send_level()
        self._check_all()
        if loss.replacing and not self._stopping:
            self._spawn(self._replace(w))

    def _check_all(self) -> None:
        """The waits that count workers count the live ones."""
        live = set(self.live)
        if live <= self._spent:
            self._spent_event.set()
        if live <= self._replayed:
            self._replayed_event.set()
        if live <= set(self._stopped):
            self._stopped_event.set()
        self._idle_event.set()

    # ---- data from the workers ----------------------------------------------------------------
    def _receive(self, msg: object) -> None:
        if isinstance(msg, p.RecordLines):
            self._on_lines(msg)
        elif isinstance(msg, p.Window):
            self._on_window(msg)
        elif isinstance(msg, p.Ready):
            self._on_ready(msg)
        elif isinstance(msg, p.Waiting):
            self.on_event("error", f"load waits: {msg.error}")
        elif isinstance(msg, p.LoadThread):
            if msg.retry_s is None:
                self._realtime_back.pop(msg.worker_id, None)
            else:
                self._realtime_back[msg.worker_id] = self.clock.now() + msg.retry_s
            if self.target is not None:
                self.target = replace(self.target, load_thread=msg.text)
            self.on_load_thread(msg.text)
        elif isinstance(msg, p.BudgetSpent):
            self._spent.add(msg.worker_id)
            self._check_all()
        elif isinstance(msg, p.ArrivalsDone):
            self._replayed.add(msg.worker_id)
            self._check_all()
        elif isinstance(msg, p.Pong):
            self._sync.on_pong(msg)
        elif isinstance(msg, p.Stopped):
            self._stopped[msg.worker_id] = msg
            self._inflight[msg.worker_id] = 0
            self._inflight_by_step[msg.worker_id] = {}
            self._window_end[msg.worker_id] = math.inf
            self._check_all()

    def _on_lines(self, msg: p.RecordLines) -> None:
        if msg.worker_id in self.lost:
            return  # its in-flight requests are counted as worker_lost already
        dicts = [json.loads(line) for line in msg.lines]
        records = [decode_record(d) for d in dicts]
        eps = [d.get(ENDPOINT_KEY) for d in dicts] if self.urls else None
        if records:
            top = max(r.request_id for r in records)
            if top > self._max_id.get(msg.worker_id, -1):
                self._max_id[msg.worker_id] = top
        self.on_records(RecordBatch(msg.worker_id, records, eps))

    def _on_window(self, w: p.Window) -> None:
        if w.worker_id in self.lost:
            return
        self._inflight[w.worker_id] = w.inflight
        self._inflight_by_step[w.worker_id] = dict(w.inflight_by_step)
        self.backoff[w.worker_id] = w.backoff
        self._window_end[w.worker_id] = w.t1
        self._window_totals[w.worker_id] = self._window_totals.get(w.worker_id, Totals()) + Totals(
            w.sent, w.finished, w.failed, w.cancelled
        )
        self._idle_event.set()
        self.on_window(self.cpu_watch.annotate(w) if self.cpu_watch is not None else w)

    def _on_ready(self, msg: p.Ready) -> None:
        if msg.worker_id in self._joining:
            self._joined(msg.worker_id, msg.error)
            if msg.error is None:
                self._watch_clock(msg)
            return
        if msg.error is not None:
            self.failure = EngineError(msg.error_kind or "other", msg.error)
            self.ready.set()
            return
        self._readies[msg.worker_id] = msg
        self._watch_clock(msg)
        if len(self._readies) == self.workers:
            first = self._readies[min(self._readies)]
            self.target = Target(
                first.model,
                first.endpoint,
                first.stream_options,
                first.vllm_fields,
                first.workload,
                all(r.per_request_metrics for r in self._readies.values()),
                " · ".join(
                    dict.fromkeys(r.load_thread for r in self._readies.values() if r.load_thread)
                ),
            )
            self.ready.set()

    def _watch_clock(self, msg: p.Ready) -> None:
        """A worker on this host is the controller's own CPU user; one on another keeps its
        clock offset measured."""
        if msg.host == host_id() and self.cpu_watch is not None:
            self.cpu_watch.own.add(msg.pid)
        if msg.host != host_id():
            self._spawn(self._sync.keep(msg.worker_id, lambda: self._stopping))
