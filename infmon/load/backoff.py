"""When a stream sends its next request after failures: exponential backoff with jitter, and the
server's ``Retry-After``. Pure (no I/O, no clock of its own): the driver asks it for a delay.

Why: a server that fails every request at once (refused, 503, invalid JSON in a 200 stream)
otherwise gets a hot loop of requests (5,371 in 5 s at c=2 against one answering invalid
JSON), which measures nothing and may be what keeps it down. Each stream (a closed-loop worker,
or the open loop's arrivals) keeps its own ``Backoff``; the load level is not touched, so the
streams resume the set load as soon as the server answers again.

The policy: after the n-th consecutive failure (of any kind but a cancellation) wait
``min(cap, base × 2^(n-1))`` scaled by a random factor in [0.5, 1] (jitter, so streams that
failed together do not retry together); a ``Retry-After`` on a 429/503 is honoured as a
minimum, up to ``RETRY_AFTER_MAX_S``. One success resets it.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from infmon.model.records.request import ErrorKind, RequestRecord

BASE_S = 0.05
"""The first delay (before jitter): 0.05, 0.1, 0.2, 0.4, 0.8 s … after 1, 2, 3, 4, 5 failures."""
CAP_S = 1.0
"""The longest delay backoff alone reaches (so a stream resumes within a second of the server's
return)."""
RETRY_AFTER_MAX_S = 60.0
"""A ``Retry-After`` longer than this is cut to it (a server cannot park the load forever)."""
JITTER = (0.5, 1.0)
"""The delay is multiplied by a uniform factor in this range."""


def parse_retry_after(value: str | None, now_wall_s: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date (RFC 9110).

    None when absent or unreadable; never negative, at most ``RETRY_AFTER_MAX_S``.
    """
    if value is None:
        return None
    text = value.strip()[:64]
    if not text:
        return None
    if text.isdigit():
        return min(RETRY_AFTER_MAX_S, float(int(text[:10])))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        return None
    delay = when.timestamp() - now_wall_s
    return min(RETRY_AFTER_MAX_S, max(0.0, delay)) if math.isfinite(delay) else None


def counts_as_failure(rec: RequestRecord) -> bool:
    """Every failed request but one cancelled at shutdown."""
    return not rec.ok and rec.error_kind != ErrorKind.CANCELLED


@dataclass(frozen=True, slots=True)
class BackoffState:
    """What one stream is waiting for, to show ("backing off 0.8 s after 5 failures")."""

    failures: int
    """Consecutive failures so far (0: not backing off)."""
    delay_s: float
    """The wait chosen after the last failure."""
    retry_after: bool
    """The wait comes from the server's ``Retry-After``."""


class Backoff:
    """The backoff of one stream; ``after(record)`` gives the wait before its next request."""

    __slots__ = ("_rng", "base_s", "cap_s", "state")

    def __init__(
        self, rng: random.Random | None = None, *, base_s: float = BASE_S, cap_s: float = CAP_S
    ) -> None:
        self._rng = rng or random.Random()
        self.base_s, self.cap_s = base_s, cap_s
        self.state = BackoffState(0, 0.0, False)

    def after(self, rec: RequestRecord) -> float:
        """Seconds to wait before the next request, given how ``rec`` ended (0 on success)."""
        if not counts_as_failure(rec):
            self.state = BackoffState(0, 0.0, False)
            return 0.0
        n = self.state.failures + 1
        delay = min(self.cap_s, self.base_s * 2.0 ** min(n - 1, 60)) * self._rng.uniform(*JITTER)
        hinted = rec.retry_after_s if rec.http_status in (429, 503) else None
        from_server = hinted is not None and hinted >= delay
        if hinted is not None:
            delay = max(delay, min(hinted, RETRY_AFTER_MAX_S))
        self.state = BackoffState(n, delay, from_server)
        return delay


@dataclass(frozen=True, slots=True)
class BackoffSummary:
    """All streams at once, for a progress line or the monitor's header."""

    streams: int
    """Streams currently backing off."""
    max_failures: int
    max_delay_s: float
    retry_after: bool
    """At least one of them waits because the server said so."""

    def describe(self) -> str:
        """E.g. "backing off 0.8 s after 5 failures (2 streams; Retry-After)"; "" when none."""
        if not self.streams:
            return ""
        plural = "s" if self.max_failures != 1 else ""
        extra = [f"{self.streams} streams"] if self.streams > 1 else []
        if self.retry_after:
            extra.append("Retry-After")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return (
            f"backing off {self.max_delay_s:.1f} s after {self.max_failures} failure{plural}{tail}"
        )


def summarise(states: Iterable[BackoffState]) -> BackoffSummary:
    """The streams that are backing off, folded into one line's worth."""
    waiting = [s for s in states if s.failures]
    if not waiting:
        return BackoffSummary(0, 0, 0.0, False)
    return BackoffSummary(
        streams=len(waiting),
        max_failures=max(s.failures for s in waiting),
        max_delay_s=max(s.delay_s for s in waiting),
        retry_after=any(s.retry_after for s in waiting),
    )
