"""How the controller reaches a worker: a process of its own, or the same loop (tests, bench).

A link sends control messages (``send``, never blocking) and hands every message the worker
sends to ``on_message`` on the controller's loop; ``closed`` is set when the worker is gone.
``ProcessLink`` runs ``python -m infmon.engine.worker`` with two pipes; ``InProcessLink`` runs
the same ``WorkerCore`` on the caller's loop (its outbox pumps on that loop too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from infmon.engine import protocol as p
from infmon.engine.worker import WorkerCore

STOP_WAIT_S = 5.0


class WorkerLink(Protocol):
    worker_id: int
    closed: asyncio.Event
    description: str

    async def open(self, on_message: Callable[[object], None]) -> None: ...
    def send(self, msg: object) -> None: ...
    async def close(self) -> None: ...
    async def lost_reason(self) -> str:
        """Why the worker went away without being told to stop (one short phrase)."""
        ...


class ProcessLink:
    """A worker in a child process (its stderr goes to ``log_path`` when given, else to ours)."""

    def __init__(self, worker_id: int, log_path: Path | None = None) -> None:
        self.worker_id = worker_id
        self.log_path = log_path
        self.closed = asyncio.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.description = f"worker {worker_id} (process)"
        self._transport: asyncio.WriteTransport | None = None
        self._reader_task: asyncio.Task[None] | None = None

    async def open(self, on_message: Callable[[object], None]) -> None:
        loop = asyncio.get_running_loop()
        ctrl_r, ctrl_w = os.pipe()
        data_r, data_w = os.pipe()
        log = (
            os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            if self.log_path
            else None
        )
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "infmon.engine.worker",
                    str(ctrl_r),
                    str(data_w),
                    str(os.getpid()),
                ],
                pass_fds=(ctrl_r, data_w),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if log is None else log,
                stderr=log,  # None: this process's stderr (a worker's traceback is seen)
                start_new_session=True,  # the terminal's signals go to the controller only
            )
        finally:
            os.close(ctrl_r)
            os.close(data_w)
            if log is not None:
                os.close(log)
        self.description = f"worker {self.worker_id} (pid {self.proc.pid})"
        reader = asyncio.StreamReader(limit=p.MAX_FRAME)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(data_r, "rb", buffering=0)
        )
        transport, _ = await loop.connect_write_pipe(
            asyncio.Protocol, os.fdopen(ctrl_w, "wb", buffering=0)
        )
        self._transport = transport
        self._reader_task = loop.create_task(self._read(reader, on_message))

    async def _read(
        self, reader: asyncio.StreamReader, on_message: Callable[[object], None]
    ) -> None:
        try:
            while (msg := await p.read_frame(reader)) is not None:
                on_message(msg)
        finally:
            self.closed.set()

    def send(self, msg: object) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(p.frame(msg))

    async def lost_reason(self) -> str:
        """How the process ended (its data pipe closed without a ``Stopped``)."""
        proc = self.proc
        if proc is None:
            return "never started"
        loop = asyncio.get_running_loop()
        with contextlib.suppress(asyncio.TimeoutError, subprocess.TimeoutExpired):
            await asyncio.wait_for(loop.run_in_executor(None, proc.wait, 1.0), 2.0)
        return exit_text(proc.pid, proc.returncode)

    async def close(self) -> None:
        """Close the control pipe (the worker stops) and reap the process."""
        if self._transport is not None:
            self._transport.close()
        proc = self.proc
        if proc is not None:
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.run_in_executor(None, proc.wait), STOP_WAIT_S)
            except asyncio.TimeoutError:
                proc.kill()
                await loop.run_in_executor(None, proc.wait)
        if self._reader_task is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.closed.wait(), 1.0)
            self._reader_task.cancel()


def exit_text(pid: int, code: int | None) -> str:
    """``pid 123 killed by SIGKILL`` / ``pid 123 exited with 1`` / ``pid 123 closed its pipe``."""
    if code is None:
        return f"pid {pid} closed its pipe"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"pid {pid} killed by {name}"
    return f"pid {pid} exited with {code}"


class InProcessLink:
    """The worker core on the controller's own loop: measures as a process would, minus the
    process boundary."""

    def __init__(
        self,
        worker_id: int,
        client_factory: Callable[..., Any] | None = None,
        workload_factory: Callable[..., Any] | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.client_factory = client_factory
        self.workload_factory = workload_factory
        self.closed = asyncio.Event()
        self.description = f"worker {worker_id} (in process)"
        self._core: WorkerCore | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def open(self, on_message: Callable[[object], None]) -> None:
        loop = asyncio.get_running_loop()

        def deliver(msg: object) -> None:
            if loop.is_closed():
                return
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(on_message, msg)

        self._core = WorkerCore(
            deliver, client_factory=self.client_factory, workload_factory=self.workload_factory
        )

    def send(self, msg: object) -> None:
        core = self._core
        if core is None or self.closed.is_set():
            return
        task = asyncio.get_running_loop().create_task(self._handle(core, msg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, core: WorkerCore, msg: object) -> None:
        if not await core.handle(msg):
            self.closed.set()

    async def lost_reason(self) -> str:
        return "its core stopped"

    async def crash(self) -> None:
        """End the core as a crash would (tests): in-flight streams stop, nothing is sent."""
        core = self._core
        if core is not None:
            core.deliver = lambda msg: None
            if core.outbox is not None:
                core.outbox.deliver = lambda msg: None
            await core.handle(p.Stop(cancel=True))
        self.closed.set()

    async def close(self) -> None:
        if not self.closed.is_set() and self._core is not None:
            await self._handle(self._core, p.Stop(cancel=True))
        await asyncio.gather(*self._tasks, return_exceptions=True)
