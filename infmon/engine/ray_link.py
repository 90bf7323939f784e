"""Load workers as Ray actors (``--ray ADDRESS``): the same ``WorkerCore`` a worker process
runs, in an actor of its own, one CPU each, placed by ``ray_setup.plan_placement``.

Ray is imported only through ``ray_setup`` and only when asked (``pip install 'infmon[ray]'``).
The controller sends control messages with ``handle.remote`` (an async method with no await
before it queues the message, so messages are applied in the order sent, one at a time, as a
process worker's pipe applies them) and long-polls the actor for what it sends (``poll``: the
messages queued since the last poll, or an empty list after ``POLL_S``). The actor that dies
(``ray.kill``, a crash, its node gone) fails the pending poll: the link closes and the
controller counts the worker as lost.

Before any load, the link asks the actor who it is (``identity``: the same infmon as the
controller, or the run stops with both named) and measures its clock (``clock``: the actor
stamps when the call arrived and when it answered, NTP-style, over one call's request and
reply, a symmetric path; the sample with the smallest round trip wins). The actor's worker then
stamps everything on the controller's clock (``ShiftedClock``), so warm-up edges and records
agree with the controller from the first request. The offset is measured again every
``RESYNC_S``; the last one, with its uncertainty (half the round trip), is the link's
``clock_offset``.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from infmon.engine.ray_logs import LOG_TAIL_BYTES, own_log_paths, read_tails, write_worker_log
from infmon.engine.ray_setup import (
    HeadWatch,
    NodeSlot,
    RayOptions,
    RaySetupError,
    alive_nodes,
    code_identity,
    connect,
    head_address,
    plan_placement,
    ray_module,
    source_address,
)
from infmon.engine.types import EngineError

T = TypeVar("T")

POLL_S = 0.2
"""How long a poll waits for a message before it returns none (a window is 250 ms)."""
STOP_WAIT_S = 5.0
CLOCK_SAMPLES = 16
RESYNC_S = 60.0
SKEW_ENV = "INFMON_TEST_CLOCK_SKEW_S"
"""Tests only: a known offset added to an actor's clock, so the clock sync can be checked."""


class ShiftedClock:
    """This host's monotonic clock put on the controller's: ``perf_counter + skew - offset``."""

    __slots__ = ("offset_s", "skew_s")

    def __init__(self, skew_s: float = 0.0) -> None:
        self.skew_s, self.offset_s = skew_s, 0.0

    def raw(self) -> float:
        """This host's clock (with the test skew), before the controller's offset."""
        return time.perf_counter() + self.skew_s

    def now(self) -> float:
        return self.raw() - self.offset_s


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """Actor clock minus controller clock, and half the round trip it was measured over."""

    offset_s: float
    uncertainty_s: float


def best_offset(samples: Sequence[tuple[float, float, float, float]]) -> ClockOffset:
    """NTP's estimate from (sent, actor received, actor answered, back) stamps: the sample
    with the smallest round trip net of the actor's own time."""

    def rtt(s: tuple[float, float, float, float]) -> float:
        return (s[3] - s[0]) - (s[2] - s[1])

    t0, t1, t2, t3 = min(samples, key=rtt)
    return ClockOffset(((t1 - t0) + (t2 - t3)) / 2, max(0.0, rtt((t0, t1, t2, t3))) / 2)


class RayWorker:
    """The actor's body (wrapped by ``ray.remote`` in ``actor_class``)."""

    def __init__(self) -> None:
        from infmon.engine.worker import WorkerCore
        from infmon.load.runtime import tune_for_load

        tune_for_load()
        self._clock = ShiftedClock(float(os.environ.get(SKEW_ENV, "0") or 0))
        self._out: collections.deque[object] = collections.deque()
        self._lock = threading.Lock()
        self._inbox: asyncio.Queue[object] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._core = WorkerCore(self._deliver, clock=self._clock)
        self._done = False

    def identity(self) -> tuple[str, str]:
        """What this actor runs, and where (its node's address, as Ray knows it)."""
        ident, host = code_identity(), str(ray_module().util.get_node_ip_address())
        print(f"infmon load worker (Ray actor) on {host}, pid {os.getpid()}: {ident}", flush=True)
        return ident, host

    def log_paths(self) -> tuple[int, tuple[str, ...]]:
        """This actor's pid and the files its stdout and stderr go to on its node."""
        return os.getpid(), own_log_paths()

    def logs(self, max_bytes: int) -> list[tuple[str, str]]:
        """The last ``max_bytes`` of each of those files."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        return read_tails(own_log_paths(), max_bytes)

    def clock(self) -> tuple[float, float]:
        """When this call arrived and when it answered, on this host's clock."""
        t1 = self._clock.raw()
        return t1, self._clock.raw()

    def set_offset(self, offset_s: float) -> None:
        self._clock.offset_s = offset_s

    def _deliver(self, msg: object) -> None:
        """From the outbox thread (or the actor's loop): queue for the next poll."""
        with self._lock:
            self._out.append(msg)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(wake.set)

    def _bind(self) -> asyncio.Queue[object]:
        if self._inbox is None:
            self._loop = asyncio.get_running_loop()
            self._inbox, self._wake = asyncio.Queue(), asyncio.Event()
            self._loop.create_task(self._apply())
        return self._inbox

    async def _apply(self) -> None:
        assert self._inbox is not None
        while True:
            msg = await self._inbox.get()
            if not await self._core.handle(msg):
                self._done = True
                self._deliver(None)  # wake the poll: the worker has stopped
                return

    async def handle(self, msg: object) -> None:
        self._bind().put_nowait(msg)

    async def poll(self) -> tuple[list[object], bool]:
        """What the worker sent since the last poll, and whether it has stopped."""
        self._bind()
        assert self._wake is not None
        with self._lock:
            empty = not self._out
        if empty and not self._done:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_S)
        self._wake.clear()
        with self._lock:
            out = [m for m in self._out if m is not None]
            self._out.clear()
        return out, self._done


_ACTOR: Any = None


def actor_class() -> Any:
    """``RayWorker`` as a Ray actor class, one CPU each (made once, at first use)."""
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = ray_module().remote(num_cpus=1, max_restarts=0, max_concurrency=8)(RayWorker)
    return _ACTOR


class RayLink:
    """The controller's side of one actor (the ``WorkerLink`` protocol)."""

    def __init__(
        self,
        worker_id: int,
        opts: RayOptions,
        node_id: str | None = None,
        say: Callable[[str], None] = print,
        log_dir: Path | None = None,
    ) -> None:
        self.worker_id, self.opts, self.node_id, self.say = worker_id, opts, node_id, say
        self.log_dir = log_dir
        """The session directory: the actor's output is written under ``workers/`` at close."""
        self.pid = 0
        self.log_paths: tuple[str, ...] = ()
        self.head_lost = False
        """The cluster's head is gone: nothing that needs it (``ray.kill``) is asked."""
        self.closed = asyncio.Event()
        self.description = f"worker {worker_id} (Ray actor)"
        self.actor: Any = None
        self.host = "?"
        self.clock_offset: ClockOffset | None = None
        self._error: BaseException | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def open(self, on_message: Callable[[object], None]) -> None:
        """Place the actor, check it runs our infmon, set its clock; then start polling."""
        options: dict[str, object] = {"name": None}
        if self.node_id is not None:
            strategy = ray_module().util.scheduling_strategies.NodeAffinitySchedulingStrategy
            options["scheduling_strategy"] = strategy(self.node_id, soft=False)
        self.actor = actor_class().options(**options).remote()
        ident, self.host = await self._within(self.actor.identity.remote(), "to be placed")
        mine = code_identity()
        if ident != mine:
            raise EngineError(
                "ray", f"worker {self.worker_id} on {self.host} runs {ident}; the controller {mine}"
            )
        self.description = f"worker {self.worker_id} (Ray actor on {self.host})"
        self.pid, self.log_paths = await self._within(self.actor.log_paths.remote(), "to answer")
        off = await self.sync_clock()
        self.say(
            f"{self.description}: clock offset {off.offset_s * 1e3:+,.3f} ms "
            f"± {off.uncertainty_s * 1e3:,.3f} ms"
        )
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._poll(on_message)), loop.create_task(self._resync())]

    async def _within(self, ref: Awaitable[T], what: str) -> T:
        try:
            return await asyncio.wait_for(ref, self.opts.timeout_s)
        except asyncio.TimeoutError:
            raise EngineError(
                "ray",
                f"worker {self.worker_id}: the Ray actor took over {self.opts.timeout_s:g} s "
                f"{what} (each needs 1 free CPU; the cluster has "
                f"{_free_cpus()} free)",
            ) from None
        except Exception as exc:  # RayActorError and kin: the actor could not start
            raise EngineError("ray", f"worker {self.worker_id}: {_first_line(exc)}") from None

    async def sync_clock(self) -> ClockOffset:
        samples = []
        for _ in range(CLOCK_SAMPLES):
            t0 = time.perf_counter()
            t1, t2 = await self._within(self.actor.clock.remote(), "to answer")
            samples.append((t0, t1, t2, time.perf_counter()))
        self.clock_offset = best_offset(samples)
        await self._within(self.actor.set_offset.remote(self.clock_offset.offset_s), "to answer")
        return self.clock_offset

    async def _resync(self) -> None:
        with contextlib.suppress(EngineError):
            while not self.closed.is_set():
                await asyncio.sleep(RESYNC_S)
                await self.sync_clock()

    async def _poll(self, on_message: Callable[[object], None]) -> None:
        try:
            while True:
                msgs, done = await self.actor.poll.remote()
                for msg in msgs:
                    on_message(msg)
                if done:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the actor died: RayActorError and kin
            self._error = exc
        finally:
            self.closed.set()

    def send(self, msg: object) -> None:
        if self.actor is not None and not self.closed.is_set():
            self.actor.handle.remote(msg)

    async def lost_reason(self) -> str:
        exc = self._error
        if exc is None:
            return "the Ray actor stopped"
        first = _first_line(exc)
        return f"the Ray actor died ({type(exc).__name__}{': ' + first[:120] if first else ''})"

    async def close(self) -> None:
        """The worker was told to stop: wait for its last messages, then end the actor."""
        if self._tasks:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.closed.wait(), STOP_WAIT_S)
            for task in self._tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.actor is not None and self.log_dir is not None and self.pid:
            await self._collect_log(self.log_dir)
        if self.actor is not None and not self.head_lost:
            with contextlib.suppress(Exception):
                ray_module().kill(self.actor)

    async def _collect_log(self, log_dir: Path) -> None:
        """The actor's output into ``workers/<node>-<pid>.log``; a lost one's file names where
        its output stays."""
        title = f"{self.description}, pid {self.pid}: its stdout and stderr"
        note, tails = None, []
        if self._error is not None or self.head_lost:
            why = (
                "was lost" if self._error is not None else "could not be asked (the head was lost)"
            )
            note = f"the actor {why}: its output stays on its node, in " + ", ".join(self.log_paths)
        else:
            try:
                tails = await asyncio.wait_for(
                    self.actor.logs.remote(LOG_TAIL_BYTES), min(self.opts.timeout_s, STOP_WAIT_S)
                )
            except Exception as exc:  # the actor died as it stopped, or did not answer in time
                note = (
                    f"the actor did not send its output ({_first_line(exc)}): it stays on its node"
                )
        with contextlib.suppress(OSError):
            write_worker_log(log_dir, title, self.host, self.pid, tails, note)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def _free_cpus() -> int:
    with contextlib.suppress(Exception):
        return int(ray_module().available_resources().get("CPU", 0))
    return 0


def ray_links(
    opts: RayOptions,
    workers: int | None,
    say: Callable[[str], None],
    log_dir: Path | None = None,
) -> list[RayLink]:
    """``workers`` actors (None: one per CPU of the cluster), placed as ``opts`` says."""
    try:
        connect(opts)
        ray = ray_module()
        nodes = alive_nodes(ray)
        cpus = sum(n.cpus for n in nodes)
        if workers is None:
            workers = max(1, cpus)
        controller = controller_node(ray, nodes, opts)
        slots, note = plan_placement(nodes, controller, workers, opts.placement)
    except RaySetupError as exc:
        raise RuntimeError(str(exc)) from None
    if note:
        say(note)
    links = [RayLink(i, opts, node, say, log_dir) for i, node in enumerate(slots)]
    address = head_address(ray, opts)
    if address is not None:
        HeadWatch(address, lambda reason: _end_run(links, reason, say)).start()
    return links


def _end_run(links: Sequence[RayLink], reason: str, say: Callable[[str], None]) -> None:
    """The head is gone: end the run as SIGTERM does (the workers are told to stop over their
    direct calls, which need no head; their records come back; the reports are written)."""
    running = [link for link in links if link.actor is not None and not link.closed.is_set()]
    if not running or not ray_module().is_initialized():
        return  # the run is over (or Ray was shut down on purpose): nothing to end
    for link in links:
        link.head_lost = True
    say(f"infmon: {reason}: ending the run (reports follow)")
    # last registered, first run: after the reports, leave before Ray's own teardown, which
    # aborts the process when it cannot reach the head it was connected to
    atexit.register(_leave, 128 + signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)


def _leave(status: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def controller_node(ray: ModuleType, nodes: Sequence[NodeSlot], opts: RayOptions) -> str | None:
    """The node this controller runs on: Ray's answer for a driver; through a Ray client (a
    driver on no node) the node at the address this host reaches the head from, if any."""
    with contextlib.suppress(Exception):
        if not ray.util.client.ray.is_connected():
            return str(ray.get_runtime_context().get_node_id())
    head = head_address(ray, opts)
    mine = source_address(head) if head is not None else None
    return next((n.node_id for n in nodes if n.address == mine), None)
