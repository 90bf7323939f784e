"""A foreign host's clock offset (worker clock minus controller clock), by min-RTT ping.

A worker on the controller's boot shares its monotonic clock and is never pinged. Any other
gets ``PINGS`` pings at start and again every ``RESYNC_S``; the offset is taken from the ping
with the smallest round trip (its reply most likely came back halfway through it) and sent to
the worker, which shifts every time it reports onto the controller's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from infmon.clock import Clock
from infmon.engine import protocol as p
from infmon.engine.link import WorkerLink

PINGS = 8
RESYNC_S = 60.0


class ClockSync:
    def __init__(self, links: Sequence[WorkerLink], clock: Clock) -> None:
        self.links, self.clock = links, clock
        self.offsets: dict[int, float] = {}
        self._pongs: dict[int, list[tuple[float, float, float]]] = {}

    async def keep(self, worker_id: int, stopping: Callable[[], bool]) -> None:
        """Ping now and every ``RESYNC_S`` until ``stopping()`` (or the task is cancelled)."""
        while not stopping() and not self.links[worker_id].closed.is_set():
            self.ping(worker_id)
            await asyncio.sleep(RESYNC_S)

    def ping(self, worker_id: int) -> None:
        self._pongs[worker_id] = []
        for _ in range(PINGS):
            self.links[worker_id].send(p.Ping(self.clock.now()))

    def on_pong(self, msg: p.Pong) -> None:
        got = self._pongs.setdefault(msg.worker_id, [])
        got.append((self.clock.now() - msg.t_sent, msg.t_sent, msg.t_worker))
        if len(got) == PINGS:
            rtt, sent, worker = min(got)
            offset = worker - (sent + rtt / 2)
            self.offsets[msg.worker_id] = offset
            self.links[msg.worker_id].send(p.ClockOffset(offset))
