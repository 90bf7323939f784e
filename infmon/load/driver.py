"""The load driver: N plain asyncio tasks (closed loop) or timed arrivals (open loop).

No threads: it runs on whatever event loop calls ``start()``, the Textual app's included.
A failed request is a record and its worker sends the next one after a backoff
(``infmon.load.backoff``: exponential with jitter, ``Retry-After`` honoured), so the load
level is held through faults without a hot loop against a failing server. ``stop()`` cancels
in-flight streams and returns within ~2 s; each cancelled stream still yields a record (kind
``cancelled``) so every request sent is accounted.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from infmon.clock import Clock, MonotonicClock
from infmon.load.backoff import Backoff, BackoffSummary, summarise
from infmon.load.selfcheck import SelfCheck
from infmon.load.workload.items import Prompt, WorkItem
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.steps.span import CLOSED, RATE

EARLY_WAKE_S = 0.0015
"""Replay sends wake this early and yield until their time (timer rounding is 1 ms)."""
STOP_GRACE_S = 2.0
"""How long ``stop()`` waits for cancelled tasks to unwind."""


class StreamClient(Protocol):
    async def stream(
        self,
        request_id: int,
        prompt: Prompt,
        output_tokens: int,
        *,
        step: int = 0,
        concurrency: int | None = None,
        rate: float | None = None,
        warmup: bool = False,
        on_cancel: Callable[[RequestRecord], None] | None = None,
    ) -> RequestRecord: ...


class WorkSource(Protocol):
    """Where the driver gets its work (``infmon.load.feed.Feed``): the slot that asks (a
    closed-loop stream, or None for an open-loop arrival) and every finished request handed
    back, so a conversation's next turn can carry the answer."""

    keep_text: bool
    """Records must keep ``output_text`` until ``finished`` has seen them."""

    async def next_item(self, slot: int | None) -> WorkItem: ...

    def finished(self, item: WorkItem, rec: RequestRecord) -> None: ...


class ArrivalSource(Protocol):
    """Send times (seconds after the replay starts) with their items: a trace or schedule."""

    async def next_arrival(self) -> tuple[float, WorkItem] | None: ...


class LoadDriver:
    """Owns the request tasks; the caller sets the level and receives every record."""

    def __init__(
        self,
        client: StreamClient,
        workload: WorkSource,
        on_record: Callable[[RequestRecord], None],
        clock: Clock | None = None,
        *,
        seed: int = 0,
        lag_interval_s: float = 0.05,
    ) -> None:
        self.client = client
        self.workload = workload
        self.on_record = on_record
        self.clock = clock or MonotonicClock()
        self.mode = "idle"
        """"idle", ``CLOSED`` (concurrency) or ``RATE`` (arrivals per second), as a step's level."""
        self.target: float | None = None
        """Target concurrency (closed) or request rate in req/s (open)."""
        self.max_concurrency = 0
        self.arrival = "poisson"
        self.burstiness = 1.0
        self.step = 0
        self.paused = False
        self.inflight = 0
        self.sent = self.succeeded = self.failed = self.cancelled = 0
        self.sent_by_step: Counter[int] = Counter()
        self.inflight_by_step: Counter[int] = Counter()
        """Requests in flight per step tag (a step is settled when its count reaches 0)."""
        self._rng = random.Random(seed)
        self._next_id = 0
        self._warmup_until_s = -math.inf
        self._workers: set[asyncio.Task[None]] = set()
        self._requests: set[asyncio.Task[RequestRecord]] = set()
        self._scheduler: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._slot_freed = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self.check = SelfCheck(self.clock, lag_interval_s)
        """Loop lag and achieved concurrency (``infmon.load.selfcheck``)."""
        self._stopping = False
        self._send_budget: int | None = None
        self._on_budget_spent: Callable[[], None] | None = None
        self._deciding = 0
        """Sends taken from the budget whose request is not in flight yet (a closed-loop stream
        makes its prompt first): the budget is spent only once they are all out."""
        self._took_budget = False
        """Whether the last ``_may_send`` that said yes took from the budget."""
        self._jitter = random.Random(seed + 1)
        self._backoffs: set[Backoff] = set()
        """One per closed-loop worker; ``_open_backoff`` paces the open loop's arrivals."""
        self._open_backoff = Backoff(self._jitter)
        self._open_resume_s = -math.inf
        self._slots: set[int] = set()
        self._lateness: deque[tuple[float, float]] = deque(maxlen=100_000)
        self.lateness_count = 0
        """Arrivals noted in ``_lateness`` so far (a reader takes the ones after its last)."""
        """(send time, send time − scheduled time) of trace/schedule arrivals."""

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        """Start the loop-lag monitor (call from inside the running loop)."""
        if self._lag_task is None:
            self._lag_task = asyncio.get_running_loop().create_task(
                self.check.run(lambda: self.inflight)
            )

    def set_concurrency(self, n: int) -> None:
        """Closed loop with ``n`` streams: grows at once, shrinks as requests finish."""
        if n < 0:
            raise ValueError("concurrency must be >= 0")
        self._stop_scheduler()
        self.mode, self.target = CLOSED, n
        loop = asyncio.get_running_loop()
        while len(self._workers) < n:
            slot = next(i for i in range(len(self._slots) + 1) if i not in self._slots)
            self._slots.add(slot)
            task = loop.create_task(self._worker(slot))
            self._workers.add(task)

    def set_rate(
        self,
        req_per_s: float,
        max_concurrency: int,
        arrival: str = "poisson",
        burstiness: float = 1.0,
    ) -> None:
        """Open loop: arrivals at ``req_per_s`` (Poisson, or gamma with ``burstiness``), capped."""
        if not req_per_s > 0 or max_concurrency < 1:
            raise ValueError("rate must be > 0 and max_concurrency >= 1")
        if arrival not in ("poisson", "gamma"):
            raise ValueError(f"unknown arrival process {arrival!r}")
        self.mode, self.target = RATE, float(req_per_s)
        self.max_concurrency, self.arrival, self.burstiness = max_concurrency, arrival, burstiness
        self._slot_freed.set()
        if self._scheduler is None:
            self._scheduler = asyncio.get_running_loop().create_task(self._schedule())

    def set_arrivals(
        self, source: ArrivalSource, max_concurrency: int, done: Callable[[], None] | None = None
    ) -> None:
        """Open loop at the send times of ``source`` (a trace or schedule), capped; ``done`` is
        called once the arrivals are over (the driver then pauses)."""
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self._stop_scheduler()
        self.mode, self.target = RATE, None
        self.max_concurrency = max_concurrency
        self._slot_freed.set()
        self._scheduler = asyncio.get_running_loop().create_task(self._replay(source, done))

    def lateness_since(self, count: int) -> list[float]:
        """The lateness of the arrivals noted after the first ``count`` (the newest ones)."""
        new = min(self.lateness_count - count, len(self._lateness))
        out = [late for _, late in itertools.islice(reversed(self._lateness), max(new, 0))]
        out.reverse()
        return out

    def arrival_lateness_s(self, since_s: float | None = None) -> list[float]:
        """How late each trace/schedule arrival was sent (its record's ``sent_s`` minus its
        scheduled time), in send order."""
        return [late for t, late in self._lateness if since_s is None or t >= since_s]

    def pause(self) -> None:
        """Send nothing new; in-flight requests finish."""
        self.paused = True
        self._resumed.clear()

    def resume(self, keep_budget: bool = False) -> None:
        """Send again (lifts a ``limit_sends`` budget unless ``keep_budget``)."""
        if not keep_budget:
            self._send_budget = self._on_budget_spent = None
        self.paused = False
        self._resumed.set()

    def limit_sends(self, n: int | None, spent: Callable[[], None] | None = None) -> None:
        """Send at most ``n`` more measured (non-warm-up) requests, then pause and call ``spent``.

        Like ``vllm bench serve --num-prompts``: the step holds exactly ``n`` requests, and
        the ones in flight when the last is sent finish normally. ``None`` lifts the limit.
        """
        self._send_budget, self._on_budget_spent = n, spent
        if n is not None and n <= 0:
            self._spend_budget(0)

    def _may_send(self) -> bool:
        """Take one send from the budget (decided where the request is decided, so an open loop
        cannot overshoot); False when it is spent."""
        self._took_budget = False
        if self._send_budget is None or self.clock.now() < self._warmup_until_s:
            return True
        if self._send_budget <= 0:
            return False
        self._deciding += 1
        self._took_budget = True
        self._spend_budget(self._send_budget - 1)
        return True

    def _spend_budget(self, left: int) -> None:
        self._send_budget = left
        if left <= 0:
            self.pause()
            self._maybe_spent()

    def _maybe_spent(self) -> None:
        """Say the budget is spent once it is at 0 and its last sends are in flight: said
        earlier, with every send still making its prompt, the step saw nothing in flight and
        ended before one was sent (``--step-requests`` at or below the concurrency measured 0)."""
        if self._deciding == 0 and self._send_budget is not None and self._send_budget <= 0:
            spent, self._on_budget_spent = self._on_budget_spent, None
            if spent is not None:
                spent()

    def _decided_out(self) -> None:
        """A send taken from the budget is in flight (or was given up)."""
        if self._deciding > 0:
            self._deciding -= 1
            self._maybe_spent()

    def next_step(self, warmup_s: float = 0.0) -> int:
        """Start a new step; requests sent in its first ``warmup_s`` are flagged warm-up."""
        self.set_step(self.step + 1, self.clock.now() + warmup_s)
        return self.step

    def set_step(self, index: int, warmup_until_s: float) -> None:
        """Tag requests sent from now on with step ``index``; those sent before
        ``warmup_until_s`` (this clock) are flagged warm-up (a resume sets a new warm-up)."""
        self.step = index
        self._warmup_until_s = warmup_until_s

    async def wait_idle(self, timeout_s: float | None = None) -> bool:
        """Wait until nothing is in flight; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except asyncio.TimeoutError:
            return False
        return True

    async def stop(self, cancel_inflight: bool = True) -> None:
        """Stop sending; cancel (or let finish) in-flight streams; return within ~2 s if cancelling."""
        self._stopping = True
        self._stop_scheduler()
        self.mode, self.target = "idle", None
        self._resumed.set()
        tasks = self._workers | self._requests
        if cancel_inflight:
            for task in tasks:
                task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_GRACE_S if cancel_inflight else None)
        if not (self._workers | self._requests) and self.inflight:
            # Arrivals cancelled before their first step were counted but never sent.
            self._inflight_delta(-self.inflight)
        if self._lag_task is not None:
            self._lag_task.cancel()
            await asyncio.gather(self._lag_task, return_exceptions=True)
            self._lag_task = None

    # ------------------------------------------------------------------ self-check

    def loop_lag_p99_s(self, since_s: float | None = None) -> float:
        """p99 of how late the event loop woke a 50 ms timer (nan when not measured)."""
        return self.check.lag_p99_s(since_s)

    @property
    def backoff(self) -> BackoffSummary:
        """Streams now waiting after failures ("backing off 0.8 s after 5 failures");
        ``.describe()`` is "" while every stream is sending normally."""
        states = [b.state for b in self._backoffs]
        if self.mode == RATE:
            states.append(self._open_backoff.state)
        return summarise(states)

    def inflight_area_s(self) -> float:
        """∫ inflight dt since creation (request-seconds); differences give mean concurrency."""
        return self.check.area_s(self.inflight)

    def achieved_concurrency(self, window_s: float = 10.0) -> float:
        """Time-weighted mean in-flight requests over the last ``window_s`` seconds."""
        return self.check.achieved_concurrency(self.inflight, window_s)

    # ------------------------------------------------------------------ internals

    def _stop_scheduler(self) -> None:
        if self._scheduler is not None:
            self._scheduler.cancel()
            self._scheduler = None

    def _inflight_delta(self, d: int) -> None:
        self.check.advance(self.inflight)
        self.inflight += d
        if self.inflight == 0:
            self._idle.set()
        else:
            self._idle.clear()
        if d < 0:
            self._slot_freed.set()

    def _emit(self, rec: RequestRecord) -> None:
        if rec.error_kind == ErrorKind.CANCELLED:
            self.cancelled += 1
        elif rec.ok:
            self.succeeded += 1
        else:
            self.failed += 1
        self.on_record(rec)

    async def _one_request(
        self,
        counted: bool = False,
        slot: int | None = None,
        item: WorkItem | None = None,
        budgeted: bool = False,
    ) -> RequestRecord:
        rec: RequestRecord | None = None
        try:
            if item is None:
                item = await self.workload.next_item(slot)
            if item.think_s > 0 and not counted:
                await asyncio.sleep(item.think_s)  # a user reading: not in flight
        except asyncio.CancelledError:
            if counted:
                self._inflight_delta(-1)
            if budgeted:
                self._decided_out()
            raise
        except Exception as exc:  # a workload that cannot make a prompt: data, not a crash
            rec = self._failure(exc, "workload")
        if not counted:
            self._inflight_delta(+1)
        if budgeted:
            self._decided_out()
        sent_step: int | None = None
        try:
            if rec is None:
                assert item is not None
                sent_step = self.step  # _send tags the request with it, in this same step
                rec = await self._send(item)
        except BaseException:
            self._inflight_delta(-1)
            if sent_step is not None:  # cancelled: on_cancel emitted it
                self._step_request_done(sent_step)
            raise
        # The record goes out while the request still counts as in flight: the outbox thread
        # reads ``inflight`` before it takes the records, so "nothing in flight" is only said
        # once every record is out.
        try:
            if item is not None and self.workload.keep_text:
                self.workload.finished(item, rec)
                rec = replace(rec, output_text=None)
            self._emit(rec)
        finally:
            self._inflight_delta(-1)
            if sent_step is not None:
                self._step_request_done(sent_step)
        return rec

    def _step_request_done(self, step: int) -> None:
        """After its record was emitted: a step whose count reaches 0 has all its records out."""
        left = self.inflight_by_step[step] - 1
        if left > 0:
            self.inflight_by_step[step] = left
        else:
            self.inflight_by_step.pop(step, None)

    def _failure(self, exc: Exception, where: str, **kw: Any) -> RequestRecord:
        rid = self._next_id
        self._next_id += 1
        now = self.clock.now()
        text = " ".join(str(exc).split())[:200]
        return RequestRecord(
            request_id=rid,
            sent_s=now,
            end_s=now,
            error_kind=ErrorKind.OTHER,
            error_message=f"{where}: {exc.__class__.__name__}" + (f": {text}" if text else ""),
            step=self.step,
            **kw,
        )

    async def _send(self, item: WorkItem) -> RequestRecord:
        rid = self._next_id
        self._next_id += 1
        now = self.clock.now()
        closed = self.mode == CLOSED
        kw: dict[str, Any] = {
            "step": self.step,
            "concurrency": int(self.target) if closed and self.target is not None else None,
            "rate": self.target if not closed else None,
            "warmup": now < self._warmup_until_s,
            "prompt_tokens_requested": item.prompt_tokens,
            "task": item.task,
        }
        text = {"keep_text": True} if self.workload.keep_text else {}
        self.sent += 1
        self.sent_by_step[self.step] += 1
        self.inflight_by_step[self.step] += 1
        try:
            rec = await self.client.stream(
                rid, item.prompt, item.output_tokens, on_cancel=self._emit, **text, **kw
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in a client must not stop the load: file it as data
            rec = RequestRecord(
                request_id=rid,
                sent_s=now,
                end_s=self.clock.now(),
                error_kind=ErrorKind.OTHER,
                error_message=exc.__class__.__name__,
                **kw,
            )
        return rec

    async def _worker(self, slot: int) -> None:
        task = asyncio.current_task()
        backoff = Backoff(self._jitter)
        self._backoffs.add(backoff)
        try:
            while not self._stopping:
                if self.mode != CLOSED or len(self._workers) > (self.target or 0):
                    return
                if self.paused or not self._may_send():
                    await self._resumed.wait()
                    continue
                budgeted = self._took_budget
                delay_s = backoff.after(await self._one_request(slot=slot, budgeted=budgeted))
                if delay_s:
                    await asyncio.sleep(delay_s)
        finally:
            self._backoffs.discard(backoff)
            self._slots.discard(slot)
            if task is not None:
                self._workers.discard(task)

    def _interval_s(self) -> float:
        rate = self.target or 1.0
        if self.arrival == "gamma":
            shape = self.burstiness
            return self._rng.gammavariate(shape, 1.0 / (rate * shape))
        return self._rng.expovariate(rate)

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        next_t = self.clock.now()
        while not self._stopping:
            next_t += self._interval_s()
            delay = next_t - self.clock.now()
            if delay > 0:
                await asyncio.sleep(delay)
            if (wait_s := self._open_resume_s - self.clock.now()) > 0:  # backing off
                await asyncio.sleep(wait_s)
                next_t = self.clock.now()
            while self.paused or self.inflight >= self.max_concurrency or not self._may_send():
                if self.paused:
                    await self._resumed.wait()
                    next_t = self.clock.now()
                else:
                    self._slot_freed.clear()
                    await self._slot_freed.wait()
            self._inflight_delta(+1)  # counted now so a burst cannot overshoot the cap
            if self._took_budget:
                self._decided_out()
            task = loop.create_task(self._one_request(counted=True))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
            task.add_done_callback(self._arrival_done)

    def _arrival_done(self, task: asyncio.Task[RequestRecord]) -> None:
        """An open-loop request ended: failures in a row hold the next arrivals back."""
        if task.cancelled() or task.exception() is not None:
            return
        delay_s = self._open_backoff.after(task.result())
        if delay_s:
            self._open_resume_s = max(self._open_resume_s, self.clock.now() + delay_s)

    async def _replay(self, source: ArrivalSource, done: Callable[[], None] | None) -> None:
        """Send each arrival at its time; the next item is made while waiting for this one."""
        loop = asyncio.get_running_loop()
        t0 = self.clock.now()
        upcoming = loop.create_task(source.next_arrival())
        try:
            while not self._stopping:
                arrival = await upcoming
                if arrival is None:
                    break
                at_s, item = arrival
                upcoming = loop.create_task(source.next_arrival())
                await self._until(t0 + at_s)
                while self.paused or self.inflight >= self.max_concurrency or not self._may_send():
                    if self.paused:
                        paused_at = self.clock.now()
                        await self._resumed.wait()
                        t0 += self.clock.now() - paused_at  # a pause shifts the schedule
                    else:
                        self._slot_freed.clear()
                        await self._slot_freed.wait()
                self._inflight_delta(+1)
                if self._took_budget:
                    self._decided_out()
                task = loop.create_task(self._timed(item, t0 + at_s))
                self._requests.add(task)
                task.add_done_callback(self._requests.discard)
        finally:
            upcoming.cancel()
        self.pause()
        if done is not None:
            done()

    async def _until(self, due_s: float) -> None:
        """Wake at ``due_s``: a timer to just before it (timers round to the loop's clock
        tick, 1 ms on uvloop), then yield to the loop until it is there."""
        delay = due_s - self.clock.now()
        if delay > EARLY_WAKE_S:
            await asyncio.sleep(delay - EARLY_WAKE_S)
        while self.clock.now() < due_s:
            await asyncio.sleep(0)

    async def _timed(self, item: WorkItem, due_s: float) -> RequestRecord:
        rec = await self._one_request(counted=True, item=item)
        self._lateness.append((rec.sent_s, rec.sent_s - due_s))
        self.lateness_count += 1
        return rec
