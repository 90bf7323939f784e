"""The load loop watching itself, so a step can say when its own client was the limit, and why.

Three measures, all cheap on the loop: how late the loop wakes a timer (``run``: a 50 ms sleep
whose overshoot is the lag a chunk would have waited); at each wake, the load thread's own
CPU time and run-queue wait from ``/proc/thread-self/schedstat`` (the kernel's account: time
runnable but waiting for a CPU is starvation by other processes, time on a CPU is the loop's
own work); and the in-flight request-seconds (∫ inflight dt, advanced at every change of the
count) whose differences over a window give the achieved concurrency. ``CpuUsers`` names the
machine's top CPU users (``/proc/PID/stat``), read off the load loop by the controller.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from infmon.clock import Clock
from infmon.model.base.sanitize import clean


class SelfCheck:
    def __init__(self, clock: Clock, interval_s: float = 0.05) -> None:
        self.clock, self.interval_s = clock, interval_s
        self._lags: deque[tuple[float, float]] = deque(maxlen=20_000)
        """(when, how late) of each timer wake."""
        self._sched: deque[tuple[float, float, float, int]] = deque(maxlen=20_000)
        """(when, CPU s, run-queue wait s, times it got a CPU) of the load thread since the
        previous wake."""
        self._last_sched = thread_sched()
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

    def sched_between(self, t0: float, t1: float) -> tuple[float, float, int]:
        """The load thread's (CPU s, run-queue wait s, times it got a CPU) over the wakes in
        ``[t0, t1)``."""
        cpu = wait = 0.0
        runs = 0
        for t, c, w, n in reversed(self._sched):
            if t < t0:
                break
            if t < t1:
                cpu, wait, runs = cpu + c, wait + w, runs + n
        return cpu, wait, runs

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
            now = thread_sched()
            if now is not None and self._last_sched is not None:
                last = self._last_sched
                self._sched.append((t1, now[0] - last[0], now[1] - last[1], now[2] - last[2]))
            self._last_sched = now
            self._area_samples.append((t1, self.area_s(inflight())))


SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_sched(path: str = SCHEDSTAT) -> tuple[float, float, int] | None:
    """The calling thread's (CPU s, run-queue wait s, times it got a CPU) since it started;
    None off Linux (or without schedstats). Each time it got a CPU ended one wait, so the wait
    over the times is how late, on average, the thread ran after it became runnable: how late
    its timestamps were taken."""
    try:
        with open(path, "rb") as f:
            cpu_ns, wait_ns, runs = f.read(96).split()[:3]
        return int(cpu_ns) / 1e9, int(wait_ns) / 1e9, int(runs)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class CpuUser:
    """The processes of one name and the cores they used over an interval (1.0: a core)."""

    name: str
    pids: tuple[int, ...]
    cores: float

    def text(self) -> str:
        pids = ", ".join(str(p) for p in self.pids[:3]) + (", …" if len(self.pids) > 3 else "")
        name = clean(self.name, max_chars=32)  # any process may name itself anything
        return f"{name} (pid{'s' if len(self.pids) > 1 else ''} {pids}) {self.cores:.1f} cores"


class CpuUsers:
    """Every process's CPU time from ``/proc/PID/stat`` (utime + stime), read by ``sample``;
    ``top`` gives who used the most between the two last samples. A few ms per sample for a
    few hundred processes: never on the load loop (the controller's thread reads it)."""

    def __init__(self, clock: Clock, proc: str = "/proc") -> None:
        self.clock, self.proc = clock, proc
        self.tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self.cores = float(os.cpu_count() or 1)
        """No process uses more than every core (one first read between the samples: its
        whole life, which a read missed before could make look longer)."""
        self._prev: tuple[float, dict[int, tuple[str, int]]] | None = None
        self._last: tuple[float, dict[int, tuple[str, int]]] | None = None

    def sample(self) -> None:
        seen: dict[int, tuple[str, int]] = {}
        for entry in os.scandir(self.proc):
            if entry.name.isdigit():
                stat = _proc_stat(f"{self.proc}/{entry.name}/stat")
                if stat is not None:
                    seen[int(entry.name)] = stat
        self._prev, self._last = self._last, (self.clock.now(), seen)

    def top(self, n: int = 3, exclude: frozenset[int] = frozenset()) -> list[CpuUser]:
        """The ``n`` busiest process names between the two last samples (a server's or a
        job's processes count together), busiest first. A process that began between them
        (its pid unseen before, or held then by another name) used all its CPU time since: a
        job started as the load did is named, not left out for want of an earlier reading."""
        if self._prev is None or self._last is None:
            return []
        (t0, a), (t1, b) = self._prev, self._last
        if t1 <= t0:
            return []
        by_name: dict[str, tuple[list[int], float]] = {}
        for pid, (name, ticks) in b.items():
            before = a.get(pid)
            same = before is not None and before[0] == name and ticks >= before[1]
            was = before[1] if before is not None and same else 0
            if pid not in exclude and ticks > was:
                used = min((ticks - was) * self.tick_s / (t1 - t0), self.cores)
                pids, cores = by_name.get(name, ([], 0.0))
                pids.append(pid)
                by_name[name] = (pids, cores + used)
        users = [CpuUser(name, tuple(p), c) for name, (p, c) in by_name.items()]
        users.sort(key=lambda u: -u.cores)
        return users[:n]


def _proc_stat(path: str) -> tuple[str, int] | None:
    """(command name, utime + stime ticks) of one process; None when it is gone."""
    try:
        with open(path, "rb") as f:
            raw = f.read(1024)
        head, _, tail = raw.rpartition(b")")
        fields = tail.split()
        name = head.split(b"(", 1)[1].decode(errors="replace")
        return name, int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None
