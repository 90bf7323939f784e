"""The live window of the load: throughput and latency percentiles from the workers' windows.

Client tokens/s counts tokens as their chunks arrived (each window's meter), not requests that
happened to finish, so it does not square-wave when a few long requests end together. Latency
percentiles merge the windows' log-bucket histograms (within 1 % of exact). Memory is bounded:
windows older than the longest view are dropped.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from infmon.model.base.loghist import NBUCKETS, LogHistogram, SparseCounts
from infmon.model.records.window import LoadWindow

NAN = math.nan


@dataclass(frozen=True, slots=True)
class LiveRates:
    """Figures over the last ``span_s`` (all workers)."""

    span_s: float
    output_tokens_per_s: float = NAN
    requests_per_s: float = NAN
    error_fraction: float = NAN


def _merge(into: np.ndarray, s: SparseCounts | None) -> tuple[int, float, float, float]:
    if s is None or not s.index:
        return 0, 0.0, math.inf, -math.inf
    np.add.at(into, np.asarray(s.index, dtype=np.int64), np.asarray(s.count, dtype=np.int64))
    return int(sum(s.count)), s.total, s.minimum, s.maximum


def merged(windows: list[LoadWindow], name: str) -> LogHistogram:
    """The histogram ``name`` (ttft, tpot, itl, e2el, lag) over some windows."""
    h = LogHistogram()
    counts = np.zeros(NBUCKETS, dtype=np.int64)
    for w in windows:
        n, total, lo, hi = _merge(counts, getattr(w, name))
        h.n += n
        h.total += total
        h.minimum, h.maximum = min(h.minimum, lo), max(h.maximum, hi)
    h.counts = counts
    return h


class LiveWindows:
    """The recent windows of every worker, and what is in flight now."""

    def __init__(self, keep_s: float = 60.0) -> None:
        self.keep_s = keep_s
        self._windows: deque[LoadWindow] = deque()
        self._latest: dict[int, LoadWindow] = {}

    def add(self, w: LoadWindow) -> None:
        self._windows.append(w)
        self._latest[w.worker_id] = w
        horizon = w.t1 - self.keep_s
        while self._windows and self._windows[0].t1 < horizon:
            self._windows.popleft()

    def forget(self, worker_id: int) -> None:
        """A lost worker: nothing of it is in flight, and no step waits for its windows."""
        self._latest.pop(worker_id, None)

    def recent(self, now: float, span_s: float) -> list[LoadWindow]:
        lo = now - span_s
        return [w for w in self._windows if w.t1 > lo]

    def rates(self, now: float, span_s: float) -> LiveRates:
        ws = self.recent(now, span_s)
        if not ws:
            return LiveRates(span_s)
        covered = min(span_s, now - min(w.t0 for w in ws))
        if covered <= 0:
            return LiveRates(span_s)
        ok = sum(w.finished for w in ws)
        failed = sum(w.failed for w in ws)
        return LiveRates(
            covered,
            sum(w.tokens for w in ws) / covered,
            ok / covered,
            failed / (ok + failed) if ok + failed else NAN,
        )

    def histogram(self, now: float, span_s: float, name: str) -> LogHistogram:
        return merged(self.recent(now, span_s), name)

    @property
    def inflight(self) -> int | None:
        return sum(w.inflight for w in self._latest.values()) if self._latest else None

    def inflight_through(self, step: int) -> int:
        return sum(n for w in self._latest.values() for s, n in w.inflight_by_step if s <= step)

    def reported_since(self, t: float) -> bool:
        """Has every worker closed a window after ``t``?"""
        return bool(self._latest) and all(w.t1 >= t for w in self._latest.values())

    @property
    def backoff(self) -> str | None:
        return next((w.backoff for w in self._latest.values() if w.backoff), None)
