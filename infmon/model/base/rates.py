"""Counters → increases and rates, reset-aware: a counter that goes down restarted from 0."""

from __future__ import annotations

from collections import deque


def counter_increase(prev: float | None, cur: float | None) -> tuple[float | None, bool]:
    """The increase between two readings and whether the counter was reset in between.

    After a reset the increase is the new value (it counted up from 0), as PromQL's
    ``increase()`` does; never negative. Unknown in, unknown out.
    """
    if prev is None or cur is None:
        return None, False
    if cur < prev:
        return cur, True
    return cur - prev, False


def counter_rate(
    prev: float | None, cur: float | None, window_s: float | None
) -> tuple[float | None, bool]:
    """Per-second rate over ``window_s``; None when either reading or the window is unknown."""
    inc, reset = counter_increase(prev, cur)
    if inc is None or window_s is None or window_s <= 0:
        return None, reset
    return inc / window_s, reset


def ratio(num: float | None, den: float | None) -> float | None:
    """num / den, or None when unknown or the denominator is 0 (nothing happened)."""
    if num is None or den is None or den == 0:
        return None
    return num / den


class TrailingRate:
    """A rate over the last ``span_s`` from per-scrape rates: the increase each scrape window
    saw, summed, over the time those windows cover.

    A server's per-scrape rate swings when its windows (1 s) are not much longer than its engine
    steps: at 1,024 streams the simulator's generation tokens/s read 3k–10k from one second to
    the next while the clients' stayed level. Over the same span as the client's figure the two
    compare like with like.
    """

    def __init__(self, max_parts: int = 3600) -> None:
        self._parts: deque[tuple[float, float, float]] = deque(maxlen=max_parts)

    def add(self, t: float, rate: float | None, window_s: float | None) -> None:
        """One scrape at ``t``: its rate over the ``window_s`` before it (unknowns are skipped)."""
        if rate is not None and window_s and window_s > 0 and rate == rate:
            self._parts.append((t, rate * window_s, window_s))

    def over(self, now: float, span_s: float) -> float | None:
        """The rate over the scrapes in (now − span_s, now]; None when there is none."""
        increase = covered = 0.0
        for t, inc, window in reversed(self._parts):
            if t > now:
                continue
            if t <= now - span_s:
                break
            increase += inc
            covered += window
        return increase / covered if covered else None
