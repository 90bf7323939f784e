"""The stall detector: a stream that sends no new token for ``--stall-timeout`` is cut.

A server can keep a stream open for ever without generating: one token, then ``: ping``
comments every second (each read resets the read timeout), or nothing at all until the 600 s
read timeout. Such a stream holds a slot and counts as "in flight" while the load measures
nothing. ``unless_stalled`` watches the stream's own progress (its content-chunk count) and,
when it has not moved for ``timeout_s`` (30 s by default; 0 turns it off), cancels the
exchange (the connection is dropped) and fails the request as ``stalled``, a kind of its own,
counted like any failure: in the events and error panes, ``bench``'s table and the reports.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Awaitable, Callable
from typing import TypeVar

from infmon.load.stream_state import StreamFailure
from infmon.model.records.request import ErrorKind

STALL_TIMEOUT_S = 30.0
"""Default ``--stall-timeout``: longest wait for a stream's next token."""

T = TypeVar("T")


def stall_message(timeout_s: float, chunks: int) -> str:
    when = (
        "after its first token"
        if chunks == 1
        else f"after {chunks:,} tokens"
        if chunks
        else "before any token"
    )
    return f"no new token for {timeout_s:g}s {when} (stalled; --stall-timeout)"


class _Watch:
    """One stream's progress as the sweeper last saw it."""

    __slots__ = ("fired", "progress", "seen", "since", "task", "timeout_s")

    def __init__(
        self, task: asyncio.Task[object] | None, progress: Callable[[], int], timeout_s: float
    ) -> None:
        self.task, self.progress, self.timeout_s = task, progress, timeout_s
        self.seen, self.since, self.fired = progress(), 0.0, False
        """``since``: when ``seen`` was first seen (set by the sweeper)."""

    def check(self, now: float) -> None:
        n = self.progress()
        if n != self.seen:
            self.seen, self.since = n, now
        elif now - self.since >= self.timeout_s * 0.999 and self.task is not None:
            self.fired = True
            self.task.cancel()


class _Sweeper:
    """One timer per event loop looks at every watched stream a few times per timeout (a
    timer or a task per request cost 35-100 µs of the load loop per request here; a set add
    and remove cost nothing measurable)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.watches = loop, set[_Watch]()
        self.period_s = math.inf
        self.handle: asyncio.TimerHandle | None = None

    def add(self, watch: _Watch) -> None:
        watch.since = self.loop.time()
        self.watches.add(watch)
        if watch.timeout_s / 4 < self.period_s and self.handle is not None:
            self.handle.cancel()  # a shorter timeout than the timer was set for
            self.handle = None
        self.period_s = min(self.period_s, watch.timeout_s / 4)
        if self.handle is None:
            self.handle = self.loop.call_later(self.period_s, self._sweep)

    def _sweep(self) -> None:
        now = self.loop.time()
        for watch in list(self.watches):
            watch.check(now)
        self.handle = self.loop.call_later(self.period_s, self._sweep) if self.watches else None


_sweepers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Sweeper] = (
    weakref.WeakKeyDictionary()
)


async def unless_stalled(
    work: Awaitable[T], progress: Callable[[], int], timeout_s: float | None
) -> T:
    """``await work``, unless ``progress()`` stays the same for ``timeout_s`` (seen within a
    quarter of it): then ``work`` is cancelled and ``StreamFailure(stalled)`` raised. A
    cancellation from elsewhere (shutdown) passes through unchanged."""
    if not timeout_s or timeout_s <= 0:
        return await work
    loop = asyncio.get_running_loop()
    sweeper = _sweepers.get(loop)
    if sweeper is None:
        sweeper = _sweepers[loop] = _Sweeper(loop)
    watch = _Watch(asyncio.current_task(), progress, timeout_s)
    sweeper.add(watch)
    try:
        return await work
    except asyncio.CancelledError:
        uncancel = getattr(watch.task, "uncancel", None)  # Python 3.11+
        if watch.fired and (uncancel is None or uncancel() == 0):
            raise StreamFailure(
                ErrorKind.STALLED, stall_message(timeout_s, watch.progress())
            ) from None
        raise
    finally:
        sweeper.watches.discard(watch)
