"""Counters → increases and rates, reset-aware: a counter that goes down restarted from 0."""

from __future__ import annotations


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
