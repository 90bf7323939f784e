"""The metric poller: one long-lived task that scrapes a source every ``interval_s``.

Failures never raise out of ``run()``: they become snapshots whose ``state`` says stale, down or
"no server metrics", with the error as data. After a failure the poller backs off exponentially
(capped) and resumes by itself when the source answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from infmon.clock import Clock
from infmon.model.base.sanitize import clean
from infmon.model.server.snapshot import ServerSnapshot, SourceState, unavailable
from infmon.sources.errors import SourceError


class SnapshotSource(Protocol):
    """Anything that yields a canonical snapshot: a direct ``/metrics`` URL or a Prometheus."""

    description: str

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        """Scrape once; raise ``SourceError`` on failure. Rates need the previous call."""
        ...

    async def aclose(self) -> None: ...


class MetricPoller:
    """Scrape ``source`` every ``interval_s`` and hand each snapshot to ``on_snapshot``."""

    def __init__(
        self,
        source: SnapshotSource,
        interval_s: float,
        on_snapshot: Callable[[ServerSnapshot], None],
        clock: Clock,
        *,
        max_backoff_s: float = 30.0,
        stale_limit_s: float | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.source = source
        self.interval_s = interval_s
        self.on_snapshot = on_snapshot
        self.clock = clock
        self.max_backoff_s = max(max_backoff_s, interval_s)
        self.stale_limit_s = stale_limit_s if stale_limit_s is not None else 10 * interval_s
        """How long old values are shown as "stale" before the source counts as down."""
        self._sleep = sleep
        self.failures = 0
        """Consecutive failed scrapes (0 while healthy)."""
        self.last_ok: ServerSnapshot | None = None
        self.restarts = 0
        """How many server restarts (counter resets) have been seen."""

    async def poll_once(self) -> ServerSnapshot:
        """One scrape, turned into a snapshot whatever happens; also calls ``on_snapshot``."""
        now = self.clock.now()
        try:
            snap = await self.source.snapshot(now)
        except SourceError as exc:
            snap = self._failed(now, exc.kind, exc.message)
        except Exception as exc:  # errors are data: the loop must survive anything
            snap = self._failed(now, SourceError.OTHER, clean(f"{type(exc).__name__}: {exc}"))
        else:
            self.failures = 0
            self.last_ok = snap
            if snap.server_restarted:
                self.restarts += 1
        self.on_snapshot(snap)
        return snap

    def _failed(self, now: float, kind: str, message: str) -> ServerSnapshot:
        self.failures += 1
        if kind == SourceError.NO_METRICS:
            return unavailable(now, SourceState.NO_METRICS, kind, message)
        last = self.last_ok
        if last is not None and now - last.timestamp_s <= self.stale_limit_s:
            return unavailable(now, SourceState.STALE, kind, message, last)
        return unavailable(now, SourceState.DOWN, kind, message)

    def next_delay_s(self) -> float:
        """The interval while healthy; doubling per consecutive failure, capped."""
        if self.failures == 0:
            return self.interval_s
        return min(self.max_backoff_s, self.interval_s * 2.0 ** (self.failures - 1))

    async def run(self) -> None:
        """Poll until cancelled (also when a library swallowed the cancellation: the task still
        counts it, ``Task.cancelling()``, and the loop ends)."""
        task = asyncio.current_task()
        while not _cancel_requested(task):
            await self.poll_once()
            await self._sleep(self.next_delay_s())
        raise asyncio.CancelledError()


def _cancel_requested(task: asyncio.Task[None] | None) -> bool:
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling()) if cancelling is not None else False
