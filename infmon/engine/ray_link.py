"""Load workers as Ray actors (``--ray ADDRESS``): the same ``WorkerCore`` a worker process
runs, in an actor of its own on whichever node Ray places it, one CPU each.

Ray is imported only here, and only when asked (``pip install 'infmon[ray]'``). The controller
sends control messages with ``handle.remote`` (an async method with no await before it queues
the message, so messages are applied in the order sent, one at a time, as a process worker's
pipe applies them) and long-polls the actor for what it sends (``poll``: the messages queued
since the last poll, or an empty list after ``POLL_S``). The actor that dies (``ray.kill``, a
crash, its node gone) fails the pending poll: the link closes and the controller counts the
worker as lost. A worker on another host has its clock offset measured by the controller's
pings (``infmon.engine.clocksync``) through the same two calls.

ADDRESS: ``local`` starts a Ray cluster on this machine (on loopback, as many CPUs as it has);
``auto`` joins the cluster this machine belongs to; ``ray://head:10001`` connects a client.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

POLL_S = 0.2
"""How long a poll waits for a message before it returns none (a window is 250 ms)."""
STOP_WAIT_S = 5.0


class RayWorker:
    """The actor's body (wrapped by ``ray.remote`` in ``actor_class``)."""

    def __init__(self) -> None:
        from infmon.engine.worker import WorkerCore
        from infmon.load.runtime import tune_for_load

        tune_for_load()
        self._out: collections.deque[object] = collections.deque()
        self._lock = threading.Lock()
        self._inbox: asyncio.Queue[object] | None = None
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._core = WorkerCore(self._deliver)
        self._done = False

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


def _ray() -> Any:
    """The ``ray`` module, untyped (it is optional: mypy runs with and without it)."""
    return importlib.import_module("ray")


def actor_class() -> Any:
    """``RayWorker`` as a Ray actor class, one CPU each (made once, at first use)."""
    global _ACTOR
    if _ACTOR is None:
        _ACTOR = _ray().remote(num_cpus=1, max_restarts=0, max_concurrency=8)(RayWorker)
    return _ACTOR


class RayLink:
    """The controller's side of one actor (the ``WorkerLink`` protocol)."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id
        self.closed = asyncio.Event()
        self.description = f"worker {worker_id} (Ray actor)"
        self.actor: Any = None
        self._error: BaseException | None = None
        self._poller: asyncio.Task[None] | None = None

    async def open(self, on_message: Callable[[object], None]) -> None:
        self.actor = actor_class().options(name=None).remote()
        self._poller = asyncio.get_running_loop().create_task(self._poll(on_message))

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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"the Ray actor died ({type(exc).__name__}{': ' + first[:120] if first else ''})"

    async def close(self) -> None:
        """The worker was told to stop: wait for its last messages, then end the actor."""
        if self._poller is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.closed.wait(), STOP_WAIT_S)
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._poller
        if self.actor is not None:
            with contextlib.suppress(Exception):
                _ray().kill(self.actor)


def connect(address: str) -> None:
    """``ray.init`` for ADDRESS (once); RuntimeError with one line when Ray cannot be had."""
    try:
        ray = _ray()
    except ImportError:
        raise RuntimeError(
            "--ray needs Ray: pip install 'infmon[ray]' (on every node of the cluster)"
        ) from None
    if ray.is_initialized():
        return
    kwargs: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
    try:
        if address == "local":
            ray.init(include_dashboard=False, _node_ip_address="127.0.0.1", **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError from Ray
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RuntimeError(f"--ray {address}: {text[:200]}") from None


def ray_links(address: str, workers: int | None) -> Sequence[RayLink]:
    """``workers`` actors (None: one per CPU of the cluster)."""
    connect(address)
    cpus = int(_ray().cluster_resources().get("CPU", 1))
    if workers is None:
        workers = max(1, cpus)
    elif address == "local" and workers > cpus:  # no autoscaler: the rest would wait for ever
        raise RuntimeError(f"--workers {workers}: the local Ray cluster has {cpus} CPUs")
    return [RayLink(i) for i in range(workers)]
