"""A load worker: the load driver and its HTTP client, and nothing else, on their own loop.

``WorkerCore`` takes control messages (``infmon.engine.protocol``) and sends its data through an
``Outbox`` pumped on the same loop in slices (no second Python thread: see ``outbox``; a
real-time loop has one beside it that only sleeps, ``WakeCanary``, ten wake-ups a second).
``python -m infmon.engine.worker CTRL_FD DATA_FD [CONTROLLER_PID]`` runs one in a process of its
own (uvloop, ``gc.freeze``), reading control frames from one pipe and writing data frames to
another; it never imports Textual, and it ends when the controller closes the control pipe.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import signal
import socket
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any

from infmon.clock import Clock, MonotonicClock
from infmon.config import Config
from infmon.engine import protocol as p
from infmon.engine.outbox import Outbox
from infmon.engine.spread import SpreadClient, SpreadError
from infmon.load.build import build_workload
from infmon.load.client import StreamingClient
from infmon.load.driver import LoadDriver
from infmon.load.feed import Feed, WorkloadError
from infmon.load.h1 import UNANSWERED
from infmon.load.params import ClientError
from infmon.load.runtime import (
    HIGH_NICE,
    ControllerWatch,
    WakeCanary,
    high_fair_share,
    normal_priority,
    plain_normal,
    realtime_harm,
    realtime_load_thread,
    retry_after,
)
from infmon.load.selfcheck import thread_sched
from infmon.model.steps.span import CLOSED, REPLAY

Control = p.SetLevel | p.Arrivals | p.Pause | p.Resume | p.LimitSends | p.Flush
"""The protocol's messages that steer the load (``WorkerCore._apply``)."""
CONTROL = (p.SetLevel, p.Arrivals, p.Pause, p.Resume, p.LimitSends, p.Flush)


def host_id() -> str:
    """This host and boot: equal ids share one monotonic clock (no offset to measure)."""
    boot = ""
    with (
        contextlib.suppress(OSError),
        open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f,
    ):
        boot = f.read().strip()
    return f"{socket.gethostname()}/{boot}"


class WorkerCore:
    """One worker's load. ``deliver`` receives every outgoing message (on the loop)."""

    def __init__(
        self,
        deliver: Callable[[object], None],
        clock: Clock | None = None,
        client_factory: Callable[[Config, Clock], Any] | None = None,
        workload_factory: Callable[[Config], Awaitable[Any]] | None = None,
        own_process: bool = False,
    ) -> None:
        self.clock = clock or MonotonicClock()
        self.own_process = own_process
        """The loop is a worker process's only thread (not a controller's, a UI's or Ray's):
        it may take real-time priority (``Config.load_priority``)."""
        self.client_factory = client_factory or StreamingClient
        """Builds the stream client (tests inject a scripted one in process)."""
        self.workload_factory = workload_factory
        """Builds the work source (default: ``build_workload``, the server's tokenizer)."""
        self.deliver = deliver
        self.worker_id = 0
        self.outbox: Outbox | None = None
        self.client: Any = None
        self.driver: LoadDriver | None = None
        self._ready = asyncio.Event()
        self._pending: list[Control] = []
        """Level, pause and budget messages that came before the server was found."""
        self._start_task: asyncio.Task[None] | None = None
        self._budget_step = 0
        self.workload: Any = None
        """The work source (a ``Feed`` in real runs)."""
        self.spread: SpreadClient | None = None
        """Several endpoints, or several workers (records labelled with the whole level)."""
        self._realtime_watch: asyncio.Task[None] | None = None
        self.canary_factory: Callable[[], WakeCanary] = WakeCanary
        """The normal thread whose late wake-ups tell that real time starves the host."""
        self.controller_watch: Callable[[], ControllerWatch] | None = None
        """infmon's controller process on this host, watched for starvation beside a real-time
        load thread (a process worker: its parent; None: no controller here to watch)."""
        self.realtime_retry_s: float | None = None
        """Seconds at normal priority after a starvation (None: ``retry_after``'s back-off)."""
        self.fed: FedArrivals | None = None
        """The arrival times the controller sends, in a fed rate step."""
        self._level: p.SetLevel | None = None

    async def handle(self, msg: object) -> bool:
        """Apply one control message; False once the worker has stopped."""
        if isinstance(msg, p.Start):
            self._start_task = asyncio.get_running_loop().create_task(self._start_or_say(msg))
        elif isinstance(msg, p.Ping):
            self._send(p.Pong(self.worker_id, msg.t, self.clock.now()))
        elif isinstance(msg, p.ClockOffset):
            if self.outbox is not None:
                self.outbox.offset_s = msg.offset_s
        elif isinstance(msg, p.Stop):
            await self._stop(msg.cancel)
            return False
        elif not isinstance(msg, CONTROL):
            return True  # not a control message: nothing to do
        elif not self._ready.is_set():
            self._pending.append(msg)
        else:
            self._apply(msg)
        return True

    # ---- start ------------------------------------------------------------------------------
    async def _start_or_say(self, msg: p.Start) -> None:
        """Start; a bug on the way is a ``Ready`` with the error (the controller waits for
        every worker's ``Ready``, it must not wait for ever)."""
        try:
            await self._start(msg)
        except Exception as exc:
            if self._ready.is_set():
                raise
            traceback.print_exc()  # a process worker's stderr is its log
            text = f"the load worker failed to start: {type(exc).__name__}: {exc}"
            self.deliver(p.Ready(msg.worker_id, os.getpid(), host_id(), error=text))

    async def _start(self, msg: p.Start) -> None:
        self.worker_id = msg.worker_id
        self.outbox = Outbox(msg.worker_id, self.deliver, self.clock.now, window_s=msg.window_s)
        try:
            client = self._client(msg)
        except ClientError as exc:
            self.deliver(
                p.Ready(
                    msg.worker_id, os.getpid(), host_id(), error_kind=exc.kind, error=exc.message
                )
            )
            return
        self.client = client
        said = None
        while True:
            try:
                model = await client.resolve_model()
                caps = await client.detect_capabilities()
                config = replace(msg.config, seed=msg.seed)
                if self.workload_factory is not None:
                    workload = await self.workload_factory(config)
                else:
                    workload = await build_workload(config, model=model, clock=self.clock)
                break
            except (ClientError, WorkloadError, SpreadError) as exc:
                text = exc.message if isinstance(exc, ClientError) else str(exc)
                # a 404 is an answer: this server has no OpenAI API there; waiting cannot help
                final = not isinstance(exc, ClientError) or exc.http_status == 404
                if msg.retry_s is None or final:
                    kind = exc.kind if isinstance(exc, ClientError) else _kind(exc)
                    self.deliver(
                        p.Ready(msg.worker_id, os.getpid(), host_id(), error_kind=kind, error=text)
                    )
                    return
                if text != said:
                    said = text
                    self.deliver(p.Waiting(msg.worker_id, text))
                await asyncio.sleep(msg.retry_s)
        self.workload = workload
        driver = LoadDriver(client, workload, self.outbox.add_record, self.clock, seed=msg.seed)
        driver.pause()
        driver.start()
        self.driver = driver
        self.outbox.driver = driver
        self.outbox.meter = client.meter
        if self.spread is not None and len(self.spread.clients) > 1:
            self.outbox.endpoints = self.spread.endpoint_of
        self.outbox.lags = driver.check.lags_between
        self.outbox.sched = driver.check.sched_between
        self.outbox.unanswered = lambda: UNANSWERED.n
        self.outbox.backoff = lambda: driver.backoff.describe() or None
        seen = [0]

        def lateness(t0: float, t1: float) -> list[float]:
            """Arrivals noted since the last window (a send's lateness is noted when it ends)."""
            count = driver.lateness_count
            new, seen[0] = driver.lateness_since(seen[0]), count
            return new

        self.outbox.lateness = lateness
        self.outbox.start()
        self.outbox.put(
            p.Ready(
                msg.worker_id,
                os.getpid(),
                host_id(),
                model,
                msg.config.endpoint,
                caps.stream_options,
                caps.vllm_fields,
                workload=workload.info() if isinstance(workload, Feed) else None,
                per_request_metrics=caps.per_request_metrics,
                load_thread=self._load_thread(msg.config),
            )
        )
        self._ready.set()
        for pending in self._pending:
            self._apply(pending)
        self._pending.clear()

    def _load_thread(self, config: Config) -> str:
        """Take real-time priority for this loop's thread where asked and allowed; say how it
        runs (called on the loop, before the first level)."""
        if not self.own_process:
            return "normal priority (real time is taken only by a local load worker process)"
        if config.load_priority == "normal":
            return "normal priority (--load-priority normal)"
        if config.load_priority == "high":
            took, text = high_fair_share()
            if took:
                self._realtime_watch = asyncio.get_running_loop().create_task(self._watch_busy())
            return text
        took, text = realtime_load_thread()
        if took:
            self._realtime_watch = asyncio.get_running_loop().create_task(
                self._watch_realtime(again=config.realtime_again)
            )
        return text

    async def _watch_busy(self, every_s: float = 1.0) -> None:
        """Once a second: a thread at high fair share goes back to plain normal, and says so,
        when its own load kept it busy over ``REALTIME_BUSY_SHARE`` of that second (at nice -20
        a CPU-bound load would take its CPU from the server on the same cores)."""
        async for busy, _ in self._seconds(every_s):
            if (harm := realtime_harm(busy, 0.0, 0.0)) is not None:
                plain_normal()
                self._send(p.LoadThread(self.worker_id, f"normal priority since {harm.text}"))
                return

    async def _seconds(self, every_s: float) -> AsyncIterator[tuple[float, float]]:
        """Every ``every_s``: the share of it this thread was busy on a CPU, and how long it took
        (more than ``every_s``: the loop woke late); ends where schedstats are not kept. Read
        afresh after each yield, so a wait of the reader's own is in no interval."""
        while (last := thread_sched()) is not None:
            t0 = self.clock.now()
            await asyncio.sleep(every_s)
            if (now := thread_sched()) is None:
                return
            elapsed = self.clock.now() - t0
            yield (now[0] - last[0]) / max(elapsed, 1e-9), elapsed

    async def _watch_realtime(self, every_s: float = 1.0, again: bool = True) -> None:
        """Once a second: the real-time thread goes back to normal priority, and says so, when its
        own load kept it busy over ``REALTIME_BUSY_SHARE`` of that second (its load is then
        CPU-bound: for good) or when a normal thread beside it (``WakeCanary``) waited
        ``STARVED_WAIT_S`` for a core, or infmon's controller on this host (``ControllerWatch``)
        went ``CONTROLLER_STARVED_S`` runnable with no CPU (real time starves the host's other
        threads here: to the high fair share until ``retry_after``, when it takes real time again
        and says so; with ``again`` False, for good, watched as ``_watch_busy`` watches)."""
        canary = self.canary_factory()
        canary.start()
        controller = self.controller_watch() if self.controller_watch is not None else None
        retry_s = 0.0
        since = self.clock.now()  # real time held since
        try:
            async for busy, elapsed in self._seconds(every_s):
                starved = controller.starved_s() if controller is not None else 0.0
                harm = realtime_harm(busy, canary.waited(), elapsed - every_s, starved)
                if harm is None or not normal_priority():
                    continue
                if not harm.retry:
                    plain_normal()
                    self._send(p.LoadThread(self.worker_id, f"normal priority since {harm.text}"))
                    return
                high, _ = high_fair_share()  # the top of the fair class: no starving, still on time
                below = f"high fair share (nice {HIGH_NICE})" if high else "normal priority"
                if not again:
                    self._send(
                        p.LoadThread(
                            self.worker_id,
                            f"{below} since {harm.text}, for the rest of this run (its steps "
                            "measured under one priority: the server's pace beside each differs)",
                        )
                    )
                    canary.stop()
                    await self._watch_busy(every_s)
                    return
                retry_s = (
                    retry_after(retry_s, self.clock.now() - since)
                    if self.realtime_retry_s is None
                    else self.realtime_retry_s
                )
                self._send(
                    p.LoadThread(
                        self.worker_id,
                        f"{below} since {harm.text}; real time again in {retry_s:g} s",
                        retry_s,
                    )
                )
                await asyncio.sleep(retry_s)
                took, text = realtime_load_thread()
                if not took:
                    self._send(p.LoadThread(self.worker_id, text))
                    return
                self._send(
                    p.LoadThread(
                        self.worker_id,
                        f"real-time again (SCHED_RR 1) after {retry_s:g} s at {below} "
                        "(a normal thread starved beside it before)",
                    )
                )
                canary.waited()  # what it saw at normal priority is not real time's doing
                if self.controller_watch is not None:
                    controller = self.controller_watch()  # nor what the controller went through
                since = self.clock.now()
        finally:
            canary.stop()

    def _client(self, msg: p.Start) -> Any:
        """The stream client: one endpoint's, or a ``SpreadClient`` over several endpoints (and
        for any worker of several, so records carry the whole level)."""
        urls = msg.urls or ((msg.config.url,) if msg.config.url else ())
        if len(urls) <= 1 and msg.workers <= 1:
            return self.client_factory(msg.config, self.clock)
        clients = [self.client_factory(replace(msg.config, url=u), self.clock) for u in urls]
        self.spread = SpreadClient(clients, msg.spread)
        return self.spread

    # ---- control ------------------------------------------------------------------------------
    def _send(self, msg: object) -> None:
        if self.outbox is not None and self._ready.is_set():
            self.outbox.put(msg)
        else:
            self.deliver(msg)

    def _local(self, t: float) -> float:
        """A controller-clock time on this worker's clock."""
        return t + (self.outbox.offset_s if self.outbox is not None else 0.0)

    def _apply(self, msg: Control) -> None:
        d, box = self.driver, self.outbox
        assert d is not None and box is not None
        if isinstance(msg, p.SetLevel):
            box.flush_window()
            self._level = msg
            self.fed = None
            if self.spread is not None and msg.total is not None:
                self.spread.level = (msg.mode, msg.total)
            d.set_step(msg.step, self._local(msg.warmup_until_s))
            if msg.fed:
                self._feed(msg)
            elif msg.mode == REPLAY:
                assert self.workload is not None
                step = msg.step
                d.set_concurrency(0)
                d.set_arrivals(
                    self.workload,
                    msg.max_concurrency,
                    lambda: box.put(p.ArrivalsDone(self.worker_id, step, self.clock.now())),
                )
            elif msg.mode == CLOSED:
                d.set_concurrency(int(msg.value))
            else:
                d.set_concurrency(0)
                if msg.value > 0:  # a worker's share of a rate is never 0 (λ / N)
                    d.set_rate(msg.value, msg.max_concurrency, msg.arrival)
        elif isinstance(msg, p.Arrivals):
            if self.fed is not None and msg.step == d.step:
                self.fed.add([self._local(t) for t in msg.times_s])
        elif isinstance(msg, p.Pause):
            box.flush_window()
            d.pause()
        elif isinstance(msg, p.Resume):
            box.flush_window()
            d.set_step(d.step, self._local(msg.warmup_until_s))
            if self.fed is not None and self._level is not None:
                self._feed(self._level)  # the controller deals new times from now
            d.resume(keep_budget=True)
        elif isinstance(msg, p.LimitSends):
            step = d.step
            d.limit_sends(
                msg.n, lambda: box.put(p.BudgetSpent(self.worker_id, step, self.clock.now()))
            )
        elif isinstance(msg, p.Flush):
            box.flush_window()

    def _feed(self, msg: p.SetLevel) -> None:
        """Send at the times the controller deals (``Arrivals``), capped like a rate step."""
        d = self.driver
        assert d is not None and self.workload is not None
        d.set_concurrency(0)
        self.fed = FedArrivals(self.workload, self.clock.now())
        d.set_arrivals(self.fed, msg.max_concurrency)

    async def _stop(self, cancel: bool) -> None:
        if self._realtime_watch is not None:
            self._realtime_watch.cancel()
        if self._start_task is not None and not self._start_task.done():
            self._start_task.cancel()
            await asyncio.gather(self._start_task, return_exceptions=True)
        d = self.driver
        if d is not None:
            await d.stop(cancel_inflight=cancel)
        if self.client is not None:
            await self.client.aclose()
        close = getattr(self.workload, "aclose", None)
        if close is not None:
            await close()
        stopped = p.Stopped(self.worker_id, *(_totals(d) if d else (0, 0, 0, 0)))
        if self.outbox is not None and self._ready.is_set():
            self.outbox.put(stopped)
            self.outbox.close()
        else:
            self.deliver(stopped)


class FedArrivals:
    """An ``ArrivalSource`` of the times the controller sends (local clock), with the work
    source's items; it waits when the controller has not dealt further yet. Offsets count from
    when the replay was set: its task starts one loop turn later, so sends are that much late
    (tens of µs), the same for every arrival."""

    def __init__(self, workload: Any, t0_s: float) -> None:
        self.workload, self.t0_s = workload, t0_s
        self._times: collections.deque[float] = collections.deque()
        self._more = asyncio.Event()

    def add(self, times_s: list[float]) -> None:
        self._times.extend(times_s)
        self._more.set()

    async def next_arrival(self) -> tuple[float, Any] | None:
        while not self._times:
            self._more.clear()
            await self._more.wait()
        t = self._times.popleft()
        item = await self.workload.next_item(None)
        return t - self.t0_s, item


def _kind(exc: Exception) -> str:
    return "workload" if isinstance(exc, WorkloadError) else "other"


def _totals(d: LoadDriver) -> tuple[int, int, int, int]:
    return d.sent, d.succeeded, d.failed, d.cancelled


class _PipeWriter:
    """Frames to the data pipe through the loop's write transport: never blocks the loop (a
    controller slow to read lets frames queue here, not the load wait)."""

    DRAIN_S = 5.0

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self.transport = transport

    def __call__(self, msg: object) -> None:
        if not self.transport.is_closing():  # closing: the controller is gone
            self.transport.write(p.frame(msg))

    async def drain(self) -> None:
        """Wait until every frame is written (or the controller is gone), then close."""
        deadline = asyncio.get_running_loop().time() + self.DRAIN_S
        while (
            self.transport.get_write_buffer_size()
            and not self.transport.is_closing()
            and asyncio.get_running_loop().time() < deadline
        ):
            await asyncio.sleep(0.01)
        self.transport.close()


async def serve(ctrl_fd: int, data_fd: int, parent: int | None = None) -> None:
    """Read control frames until Stop or the end of the pipe; the worker's whole life."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=p.MAX_FRAME)
    pipe = os.fdopen(ctrl_fd, "rb", buffering=0)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    transport, _ = await loop.connect_write_pipe(
        asyncio.Protocol, os.fdopen(data_fd, "wb", buffering=0)
    )
    writer = _PipeWriter(transport)
    core = WorkerCore(writer, own_process=True)
    controller = parent or os.getppid()
    core.controller_watch = lambda: ControllerWatch(controller)
    watch = asyncio.ensure_future(_until_orphaned(controller, reader))
    try:
        while True:
            msg = await p.read_frame(reader)
            if msg is None:
                await core.handle(p.Stop(cancel=True))
                return
            if not await core.handle(msg):
                return
    finally:
        watch.cancel()
        await writer.drain()


ORPHAN_CHECK_S = 1.0


async def _until_orphaned(parent: int, reader: asyncio.StreamReader) -> None:
    """End the control stream when the controller is gone but its pipe is not (another
    process kept a copy of the write end): the worker must never outlive its controller."""
    while os.getppid() == parent:
        await asyncio.sleep(ORPHAN_CHECK_S)
    reader.feed_eof()


def main(argv: list[str]) -> int:
    ctrl_fd, data_fd = int(argv[0]), int(argv[1])
    parent = int(argv[2]) if len(argv) > 2 else None  # the controller (it may be gone already)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # the controller decides when the load ends
    from infmon.load.runtime import tune_for_load

    tune_for_load()
    asyncio.run(serve(ctrl_fd, data_fd, parent))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
