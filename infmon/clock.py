"""One injected clock: durations come from ``perf_counter``, tests pass a ``FakeClock``."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds (perf_counter scale); only differences mean anything."""
        ...


class MonotonicClock:
    """The real clock: ``time.perf_counter``."""

    __slots__ = ()

    def now(self) -> float:
        return time.perf_counter()


class FakeClock:
    """A clock that moves only when told to, for deterministic tests."""

    __slots__ = ("t",)

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, dt: float) -> float:
        self.t += dt
        return self.t


def wall_time() -> float:
    """Wall-clock seconds since the epoch: only for labelling reports and journals."""
    return time.time()
