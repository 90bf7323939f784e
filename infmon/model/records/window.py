"""One window of load from a worker: what the live view is made of (``infmon.engine`` sends
them every 250 ms and at every step boundary; windows of several workers add up)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infmon.model.base.loghist import LogHistogram, SparseCounts
from infmon.model.records.request import RequestRecord


class LatencyHists:
    """The four latency histograms of a window's finished requests (a worker's outbox, and a
    replayed session's windows, build them alike)."""

    __slots__ = ("e2el", "itl", "tpot", "ttft")

    def __init__(self) -> None:
        self.ttft, self.tpot, self.itl, self.e2el = (LogHistogram() for _ in range(4))

    def add(self, rec: RequestRecord) -> None:
        """A finished request (a failed one adds nothing)."""
        if not rec.ok:
            return
        self.ttft.add_one(rec.ttft_s)
        self.e2el.add_one(rec.e2el_s)
        tpot = rec.tpot_s
        if not math.isnan(tpot):
            self.tpot.add_one(tpot)
        if len(rec.chunk_times_s) > 1:
            self.itl.add(np.diff(np.asarray(rec.chunk_times_s)))


@dataclass(frozen=True, slots=True)
class LoadWindow:
    """One window of a worker's load: counters over ``[t0, t1)`` and latency histograms of the
    requests that finished in it (merge windows, and workers, by adding)."""

    worker_id: int
    t0: float
    t1: float
    sent: int
    finished: int
    failed: int
    cancelled: int
    inflight: int
    tokens: float
    """Output tokens whose chunks arrived in the window (as they arrived)."""
    inflight_area_s: float
    """∫ in-flight requests dt over the window (mean concurrency × length)."""
    inflight_by_step: tuple[tuple[int, int], ...] = ()
    sent_by_step: tuple[tuple[int, int], ...] = ()
    """Requests sent so far per step tag (cumulative)."""
    ttft: SparseCounts | None = None
    tpot: SparseCounts | None = None
    itl: SparseCounts | None = None
    e2el: SparseCounts | None = None
    lag: SparseCounts | None = None
    """How late the worker's loop woke a 50 ms timer (its own health)."""
    lateness: SparseCounts | None = None
    """How late each trace/schedule arrival was sent, of those sent in the window."""
    backoff: str | None = None
    """"backing off 0.8 s after 5 failures" while the worker backs off."""
    cpu_s: float = 0.0
    """The load thread's CPU time over the window (its own work)."""
    runq_s: float = 0.0
    """The load thread's run-queue wait over the window (runnable, no CPU free: starvation)."""
    runs: int = 0
    """How many times the load thread got a CPU over the window (each ended one wait; 0: not
    counted)."""
    cpu_users: str | None = None
    """The machine's top CPU users while the load thread starved (the controller adds it)."""
