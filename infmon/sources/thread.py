"""The metric poller on a loop of its own, in a thread: fetching and parsing a page never runs on
the load loop (a worker process) nor on the loop that renders or steps the load.

Each snapshot is handed to ``on_snapshot`` on the consumer's loop (``call_soon_threadsafe``),
so the session, the health state machine and the journal are only ever touched from one
thread. ``scrape_now`` takes one more scrape at once (a step's edge) and waits for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable

from infmon.clock import Clock
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sources.errors import SourceError
from infmon.sources.poller import MetricPoller, SnapshotSource


class ScrapeThread:
    """See the module docstring. ``make_source`` runs in the thread (its HTTP client is bound
    to the thread's loop)."""

    def __init__(
        self,
        make_source: Callable[[], SnapshotSource],
        interval_s: float,
        on_snapshot: Callable[[ServerSnapshot], None],
        clock: Clock,
        *,
        max_backoff_s: float = 30.0,
    ) -> None:
        self.make_source = make_source
        self.interval_s = interval_s
        self.on_snapshot = on_snapshot
        self.clock = clock
        self.max_backoff_s = max_backoff_s
        self.poller: MetricPoller | None = None
        self.error: SourceError | None = None
        """Why the source could not be made (``start`` raises it)."""
        self._consumer: asyncio.AbstractEventLoop | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._run, name="infmon-scrape", daemon=True)

    def start(self) -> None:
        """Call from the consumer's running loop."""
        self._consumer = asyncio.get_running_loop()
        self._thread.start()
        self._started.wait(10)
        if self.error is not None:
            raise self.error

    def _hand_over(self, snap: ServerSnapshot) -> None:
        consumer = self._consumer
        if consumer is not None and not consumer.is_closed():
            with contextlib.suppress(RuntimeError):
                consumer.call_soon_threadsafe(self.on_snapshot, snap)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._lock = asyncio.Lock()
        try:
            source = self.make_source()
        except SourceError as exc:  # e.g. a CA bundle that cannot be read: said once, by start()
            self.error = exc
            self._started.set()
            return
        self.poller = MetricPoller(
            source, self.interval_s, self._hand_over, self.clock, max_backoff_s=self.max_backoff_s
        )
        self._task = asyncio.get_running_loop().create_task(self._poll_forever())
        self._started.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await source.aclose()

    async def _poll_forever(self) -> None:
        assert self.poller is not None
        while True:
            await self._poll_once()
            await asyncio.sleep(self.poller.next_delay_s())

    async def _poll_once(self) -> ServerSnapshot:
        assert self.poller is not None and self._lock is not None
        async with self._lock:
            return await self.poller.poll_once()

    def scrape_now(self) -> concurrent.futures.Future[ServerSnapshot] | None:
        """One scrape right away (its snapshot also goes to ``on_snapshot``)."""
        if self._loop is None or self.poller is None or self._loop.is_closed():
            return None
        return asyncio.run_coroutine_threadsafe(self._poll_once(), self._loop)

    async def scrape_edge(self, timeout_s: float = 10.0) -> ServerSnapshot | None:
        """``scrape_now`` awaited from the consumer's loop (None when it could not run)."""
        fut = self.scrape_now()
        if fut is None:
            return None
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout_s)
        except (asyncio.TimeoutError, Exception):
            return None

    async def stop(self, final_scrape: bool = False, timeout_s: float = 10.0) -> None:
        """Stop polling (after one last scrape, so the last step has rates) and end the thread.
        Call from the consumer's loop: the last snapshot reaches ``on_snapshot`` first."""
        loop, task = self._loop, self._task
        if loop is None or task is None or loop.is_closed():
            return
        if final_scrape:
            await self.scrape_edge(timeout_s)
        loop.call_soon_threadsafe(task.cancel)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, timeout_s)
