"""The controller's side of the load engine: starts workers, splits each level among them,
decodes what they send, and knows what is in flight.

Used alike by ``infmon bench`` and the monitor. A level splits across N workers as ⌊C/N⌋
streams each plus one more for the first C mod N ranks (closed loop), or λ/N requests/s each
with a seed per worker (Poisson arrivals split exactly so). Records come back in the journal's
encoding and are decoded here, on the controller's loop, exactly as a report reads them back,
so the live view and every report see the same numbers.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infmon.clock import Clock
from infmon.config import Config
from infmon.engine import protocol as p
from infmon.engine.link import InProcessLink, ProcessLink, WorkerLink
from infmon.engine.worker import host_id
from infmon.journal.codec import decode_record
from infmon.load.feed import WorkloadInfo
from infmon.model.records import RequestRecord
from infmon.model.steps import CLOSED, REPLAY, Level

PINGS = 8


class EngineError(Exception):
    """The load could not start (unreachable server, unknown model, bad dataset): one line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


@dataclass(frozen=True, slots=True)
class Target:
    """What the workers found on the server."""

    model: str | None
    endpoint: str | None
    stream_options: bool
    vllm_fields: bool
    workload: WorkloadInfo | None = None


@dataclass(frozen=True, slots=True)
class Totals:
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0


def split_level(value: float, mode: str, workers: int) -> list[float]:
    """Each worker's share of a level (see the module docstring)."""
    if mode == CLOSED:
        c = int(value)
        return [float(c // workers + (1 if r < c % workers else 0)) for r in range(workers)]
    return [value / workers] * workers


class LoadEngine:
    """See the module docstring. Callbacks run on the controller's loop."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        *,
        on_records: Callable[[list[RequestRecord]], None],
        on_window: Callable[[p.Window], None] = lambda w: None,
        on_event: Callable[[str, str], None] = lambda kind, text: None,
        workers: int = 1,
        in_process: bool = False,
        log_dir: Path | None = None,
        retry_s: float | None = None,
        client_factory: Callable[..., Any] | None = None,
        workload_factory: Callable[..., Any] | None = None,
    ) -> None:
        self.config, self.clock = config, clock
        self.on_records, self.on_window, self.on_event = on_records, on_window, on_event
        self.retry_s = retry_s
        self.links: list[WorkerLink] = [
            InProcessLink(i, client_factory, workload_factory)
            if in_process or client_factory is not None
            else ProcessLink(i, log_dir / f"worker-{i}.log" if log_dir else None)
            for i in range(workers)
        ]
        self.target: Target | None = None
        self.ready = asyncio.Event()
        self.failure: EngineError | None = None
        self._readies: dict[int, p.Ready] = {}
        self._stopped: dict[int, p.Stopped] = {}
        self._stopped_event = asyncio.Event()
        self._inflight: dict[int, int] = {}
        self._inflight_by_step: dict[int, dict[int, int]] = {}
        self._spent: set[int] = set()
        self._spent_event = asyncio.Event()
        self._replayed: set[int] = set()
        self._replayed_event = asyncio.Event()
        self._idle_event = asyncio.Event()
        """Set at every window (``wait_idle`` checks what it needs)."""
        self._window_end: dict[int, float] = {}
        self._pongs: dict[int, list[tuple[float, float, float]]] = {}
        self.backoff: dict[int, str | None] = {}

    @property
    def workers(self) -> int:
        return len(self.links)

    # ---- life -------------------------------------------------------------------------------
    async def start(self) -> Target:
        """Start every worker and wait until all have found the model (or one failed)."""
        await self.open()
        return await self.wait_ready()

    async def open(self) -> None:
        """Start the workers; control sent from now on is applied once they are ready."""
        seed = self.config.seed
        for rank, link in enumerate(self.links):
            await link.open(self._receive)
            link.send(
                p.Start(link.worker_id, rank, self.workers, self.config, seed + rank, self.retry_s)
            )

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
        for link in self.links:
            link.send(p.Stop(cancel))
        pending = [link for link in self.links if not link.closed.is_set()]
        if pending and self.ready.is_set():
            try:
                await asyncio.wait_for(self._stopped_event.wait(), timeout_s)
            except asyncio.TimeoutError:
                self.on_event("error", "a load worker did not stop in time")
        await asyncio.gather(*(link.close() for link in self.links), return_exceptions=True)
        return self.totals

    @property
    def totals(self) -> Totals:
        s = self._stopped.values()
        return Totals(
            sum(x.sent for x in s),
            sum(x.succeeded for x in s),
            sum(x.failed for x in s),
            sum(x.cancelled for x in s),
        )

    # ---- control ------------------------------------------------------------------------------
    def set_level(self, step: int, level: Level, warmup_until_s: float) -> None:
        if level.mode == REPLAY:
            if self.workers > 1:
                raise EngineError("replay", "a trace or schedule replays on one load worker")
            self._replayed.clear()
            self._replayed_event.clear()
        shares = split_level(level.value, level.mode, self.workers)
        for link, share in zip(self.links, shares, strict=True):
            link.send(
                p.SetLevel(
                    step,
                    level.mode,
                    share,
                    self.config.max_concurrency,
                    self.config.arrival,
                    warmup_until_s,
                )
            )

    def pause(self) -> None:
        self._broadcast(p.Pause())

    def resume(self, warmup_until_s: float) -> None:
        self._broadcast(p.Resume(warmup_until_s))

    def flush(self) -> None:
        """Close every worker's window now (a warm-up's end, a step's edge)."""
        self._broadcast(p.Flush())

    def limit_sends(self, n: int | None) -> None:
        """Send at most ``n`` more measured requests (split across workers), then pause; None
        lifts the limit. Set it before ``resume`` so no measured request slips past it."""
        self._spent.clear()
        self._spent_event.clear()
        if n is None:
            self._broadcast(p.LimitSends(None))
            return
        for link, share in zip(self.links, split_level(n, CLOSED, self.workers), strict=True):
            link.send(p.LimitSends(int(share)))

    async def arrivals_done(self) -> None:
        """Wait until the replay step's trace or schedule has sent its last arrival."""
        await self._replayed_event.wait()

    async def budget_spent(self) -> None:
        """Wait until every worker has sent its share of the ``limit_sends`` budget."""
        await self._spent_event.wait()

    async def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until every worker says, in a window closed after this call, that nothing is in
        flight (a worker sends its records before its window: they have all arrived)."""
        since = self.clock.now()

        def idle() -> bool:
            return len(self._window_end) == self.workers and all(
                self._inflight.get(w, 1) == 0 and t1 >= since for w, t1 in self._window_end.items()
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
        for link in self.links:
            link.send(msg)

    # ---- what is in flight -------------------------------------------------------------------
    @property
    def inflight(self) -> int:
        return sum(self._inflight.values())

    def inflight_through(self, step: int) -> int:
        """Requests in flight that were sent in steps up to ``step``."""
        return sum(n for by in self._inflight_by_step.values() for s, n in by.items() if s <= step)

    # ---- data from the workers ----------------------------------------------------------------
    def _receive(self, msg: object) -> None:
        if isinstance(msg, p.RecordLines):
            self.on_records([decode_record(json.loads(line)) for line in msg.lines])
        elif isinstance(msg, p.Window):
            self._on_window(msg)
        elif isinstance(msg, p.Ready):
            self._on_ready(msg)
        elif isinstance(msg, p.Waiting):
            self.on_event("error", f"load waits: {msg.error}")
        elif isinstance(msg, p.BudgetSpent):
            self._spent.add(msg.worker_id)
            if len(self._spent) == self.workers:
                self._spent_event.set()
        elif isinstance(msg, p.ArrivalsDone):
            self._replayed.add(msg.worker_id)
            if len(self._replayed) == self.workers:
                self._replayed_event.set()
        elif isinstance(msg, p.Pong):
            self._on_pong(msg)
        elif isinstance(msg, p.Stopped):
            self._stopped[msg.worker_id] = msg
            self._inflight[msg.worker_id] = 0
            self._inflight_by_step[msg.worker_id] = {}
            self._window_end[msg.worker_id] = math.inf
            self._idle_event.set()
            if len(self._stopped) == self.workers:
                self._stopped_event.set()

    def _on_window(self, w: p.Window) -> None:
        self._inflight[w.worker_id] = w.inflight
        self._inflight_by_step[w.worker_id] = dict(w.inflight_by_step)
        self.backoff[w.worker_id] = w.backoff
        self._window_end[w.worker_id] = w.t1
        self._idle_event.set()
        self.on_window(w)

    def _on_ready(self, msg: p.Ready) -> None:
        if msg.error is not None:
            self.failure = EngineError(msg.error_kind or "other", msg.error)
            self.ready.set()
            return
        self._readies[msg.worker_id] = msg
        if msg.host != host_id():
            self._ping(msg.worker_id)
        if len(self._readies) == self.workers:
            first = self._readies[min(self._readies)]
            self.target = Target(
                first.model,
                first.endpoint,
                first.stream_options,
                first.vllm_fields,
                first.workload,
            )
            self.ready.set()

    def _ping(self, worker_id: int) -> None:
        """Measure a foreign host's clock offset: the ping with the smallest round trip."""
        self._pongs[worker_id] = []
        for _ in range(PINGS):
            self.links[worker_id].send(p.Ping(self.clock.now()))

    def _on_pong(self, msg: p.Pong) -> None:
        got = self._pongs.setdefault(msg.worker_id, [])
        now = self.clock.now()
        got.append((now - msg.t_sent, msg.t_sent, msg.t_worker))
        if len(got) == PINGS:
            rtt, sent, worker = min(got)
            offset = worker - (sent + rtt / 2)
            self.links[msg.worker_id].send(p.ClockOffset(offset))


def merged_lag_p99(windows: Sequence[p.Window]) -> float:
    """p99 of the loop lag over some windows (nan when none measured)."""
    from infmon.model.loghist import LogHistogram

    h = LogHistogram()
    for w in windows:
        if w.lag is not None:
            h.merge(LogHistogram.from_sparse(w.lag))
    return h.quantile(0.99) if h.count else math.nan
