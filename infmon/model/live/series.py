"""The over-time series the panes chart: one sample a second of each live figure, bounded.

A sample closes every whole second of the session (``due``); a gap longer than the history
(a stalled render clock) skips ahead instead of filling it. Marks and step starts are kept
with the series so the charts can place them: a mark at the sample it was made in, a step at
the sample its start falls in (two starts within a second, a coalesced key press, are one).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Mapping, Sequence

SAMPLE_PERIOD_S = 1.0
"""The over-time series get one sample per second."""
KEYS = ("client", "server", "ttft", "tpot", "itl", "e2el", "kv")
"""Client and server tokens/s, the four latencies' p90, the KV cache's use."""


class SampleSeries:
    """See the module docstring. Pure: time comes from the caller."""

    def __init__(self, start_s: float, history: int) -> None:
        self.start_s, self.history = start_s, history
        self.taken = 0
        """Samples closed since the start (the newest one's number)."""
        self._values: dict[str, deque[float]] = {k: deque(maxlen=history) for k in KEYS}
        self._marks: deque[int] = deque(maxlen=100)
        self._step_starts: deque[tuple[float, str]] = deque(maxlen=history)

    def due(self, now: float) -> Iterator[tuple[float, bool]]:
        """The samples to close up to ``now``, oldest first: (its time, whether it is the
        last one due); each is counted as taken when it is yielded."""
        due = int((now - self.start_s) / SAMPLE_PERIOD_S)
        if due <= self.taken:
            return
        self.taken = max(self.taken, due - self.history)
        while self.taken < due:
            self.taken += 1
            yield self.start_s + self.taken * SAMPLE_PERIOD_S, self.taken == due

    def append(self, values: Mapping[str, float]) -> None:
        for key in KEYS:
            self._values[key].append(values.get(key, math.nan))

    def __getitem__(self, key: str) -> tuple[float, ...]:
        return tuple(self._values[key])

    def recent(self, key: str, n: int) -> tuple[float, ...]:
        return tuple(self._values[key])[-n:]

    def mark(self) -> None:
        """An operator's mark, at the newest sample."""
        self._marks.append(self.taken)

    def step_started(self, t: float, label: str) -> None:
        if self._step_starts and self._step_starts[-1][0] >= t - 1.0:
            self._step_starts.pop()  # a coalesced press: one boundary
        self._step_starts.append((t, label))

    def mark_offsets(self) -> tuple[int, ...]:
        """Where the marks fall on the series (sample indices)."""
        first = self.taken - len(self._values["client"])
        return tuple(s - first - 1 for s in self._marks if s - first - 1 >= 0)

    def step_marks(self) -> tuple[tuple[int, str], ...]:
        """Where each step began on the series: ``(sample index, "c=4")``."""
        n = len(self._values["client"])
        first_s = self.start_s + (self.taken - n + 1) * SAMPLE_PERIOD_S
        return step_marks(tuple(self._step_starts), first_s, SAMPLE_PERIOD_S, n)


def step_marks(
    starts: Sequence[tuple[float, str]], first_sample_s: float, period_s: float, count: int
) -> tuple[tuple[int, str], ...]:
    """Where each step began on an over-time series of ``count`` samples whose first sample
    closed at ``first_sample_s``: ``(sample index, "c=4")``, those inside the series only."""
    out = []
    for t, label in starts:
        i = math.ceil((t - first_sample_s) / period_s)
        if 0 <= i < count:
            out.append((i, label))
    return tuple(out)
