"""The load loop watching itself, so a step can say when its own client was the limit.

Two measures, both cheap on the loop: how late the loop wakes a timer (``run``: a 50 ms sleep
whose overshoot is the lag a chunk would have waited), and the in-flight request-seconds
(∫ inflight dt, advanced at every change of the count) whose differences over a window give
the achieved concurrency.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Callable

import numpy as np

from infmon.clock import Clock


class SelfCheck:
    def __init__(self, clock: Clock, interval_s: float = 0.05) -> None:
        self.clock, self.interval_s = clock, interval_s
        self._lags: deque[tuple[float, float]] = deque(maxlen=20_000)
        """(when, how late) of each timer wake."""
        self._area_s = 0.0
        self._area_t = clock.now()
        self._area_samples: deque[tuple[float, float]] = deque(maxlen=4096)

    def advance(self, inflight: int) -> None:
        """Call before the in-flight count changes (it was ``inflight`` until now)."""
        now = self.clock.now()
        self._area_s += inflight * (now - self._area_t)
        self._area_t = now

    def area_s(self, inflight: int) -> float:
        """∫ inflight dt since creation (request-seconds), ``inflight`` being the count now."""
        return self._area_s + inflight * (self.clock.now() - self._area_t)

    def achieved_concurrency(self, inflight: int, window_s: float) -> float:
        """Time-weighted mean in-flight requests over the last ``window_s`` seconds."""
        now, area = self.clock.now(), self.area_s(inflight)
        past = [(t, a) for t, a in self._area_samples if t >= now - window_s]
        if not past or now - past[0][0] <= 0:
            return float(inflight)
        return (area - past[0][1]) / (now - past[0][0])

    def lag_p99_s(self, since_s: float | None = None) -> float:
        """p99 of how late the loop woke the timer (nan when not measured)."""
        lags = [lag for t, lag in self._lags if since_s is None or t >= since_s]
        return float(np.percentile(lags, 99)) if lags else math.nan

    def lags_between(self, t0: float, t1: float) -> list[float]:
        """The lags measured in ``[t0, t1)`` (a worker's window), read from the newest end: the
        window is the last few wakes of a long deque, and this runs on the load loop."""
        out = []
        for t, lag in reversed(self._lags):
            if t < t0:
                break
            if t < t1:
                out.append(lag)
        out.reverse()
        return out

    async def run(self, inflight: Callable[[], int]) -> None:
        """Measure until cancelled (a task on the load loop)."""
        interval = self.interval_s
        while True:
            t0 = self.clock.now()
            await asyncio.sleep(interval)
            t1 = self.clock.now()
            self._lags.append((t1, max(0.0, t1 - t0 - interval)))
            self._area_samples.append((t1, self.area_s(inflight())))
