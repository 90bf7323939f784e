"""The retry policy (pure) and its hook in the driver: backoff with jitter, Retry-After, reset."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time

import pytest

from infmon.clock import MonotonicClock
from infmon.load.backoff import (
    BASE_S,
    CAP_S,
    RETRY_AFTER_MAX_S,
    Backoff,
    BackoffState,
    parse_retry_after,
    summarise,
)
from infmon.load.driver import LoadDriver
from infmon.load.workload.words import RandomWords
from infmon.model.records.request import ErrorKind, RequestRecord

NOW = 1_700_000_000.0


def rec(
    kind: str | None = ErrorKind.PROTOCOL, status: int | None = None, after: float | None = None
):
    return RequestRecord(
        request_id=0, sent_s=0.0, error_kind=kind, http_status=status, retry_after_s=after
    )


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("2", NOW) == 2.0
    assert (
        parse_retry_after(" 120 ", NOW) == 120.0 if RETRY_AFTER_MAX_S >= 120 else RETRY_AFTER_MAX_S
    )
    assert parse_retry_after(email.utils.formatdate(NOW + 3, usegmt=True), NOW) == pytest.approx(
        3.0
    )
    assert parse_retry_after(email.utils.formatdate(NOW - 30, usegmt=True), NOW) == 0.0
    assert parse_retry_after("99999999999", NOW) == RETRY_AFTER_MAX_S
    for junk in (None, "", "soon", "-5", "1.5", "Wed, 99 Foo 2024", "\x1b[2J"):
        assert parse_retry_after(junk, NOW) is None


def test_backoff_doubles_with_jitter_up_to_the_cap_and_resets() -> None:
    b = Backoff(random.Random(1))
    delays = [b.after(rec()) for _ in range(12)]
    for n, d in enumerate(delays, 1):
        full = min(CAP_S, BASE_S * 2 ** (n - 1))
        assert full * 0.5 <= d <= full
    assert b.state.failures == 12 and max(delays) <= CAP_S
    assert b.after(rec(kind=None)) == 0.0 and b.state.failures == 0
    assert b.after(rec()) <= BASE_S  # starts again from the base


def test_cancelled_requests_are_not_failures() -> None:
    b = Backoff(random.Random(1))
    assert b.after(rec(ErrorKind.CANCELLED)) == 0.0 and b.state.failures == 0


def test_retry_after_is_a_minimum_on_429_and_503_only() -> None:
    b = Backoff(random.Random(1))
    assert b.after(rec(ErrorKind.HTTP, 429, 2.0)) == 2.0 and b.state.retry_after
    assert b.after(rec(ErrorKind.HTTP, 503, 500.0)) == RETRY_AFTER_MAX_S
    b = Backoff(random.Random(1))
    assert b.after(rec(ErrorKind.HTTP, 500, 2.0)) <= BASE_S  # a 500's Retry-After is not a promise


def test_summary_line() -> None:
    assert summarise([]).describe() == ""
    one = summarise([BackoffState(5, 0.8, False), BackoffState(0, 0.0, False)])
    assert one.describe() == "backing off 0.8 s after 5 failures"
    many = summarise([BackoffState(1, 0.05, False), BackoffState(3, 2.0, True)])
    assert many.describe() == "backing off 2.0 s after 3 failures (2 streams; Retry-After)"


class RefusingClient:
    """429 with Retry-After 0.3 s on every request; records when each was sent."""

    def __init__(self) -> None:
        self.sent: list[float] = []

    async def stream(self, rid, prompt, out, *, on_cancel=None, **kw) -> RequestRecord:
        self.sent.append(time.monotonic())
        await asyncio.sleep(0.001)
        return RequestRecord(
            request_id=rid,
            sent_s=0.0,
            error_kind=ErrorKind.HTTP,
            http_status=429,
            retry_after_s=0.3,
            **kw,
        )


@pytest.mark.parametrize("mode", ["closed", "open"])
async def test_the_driver_waits_and_shows_it_and_keeps_the_level(mode: str) -> None:
    client = RefusingClient()
    d = LoadDriver(
        client, RandomWords(prompt_tokens=4, output_tokens=(4, 4)), lambda r: None, MonotonicClock()
    )
    if mode == "closed":
        d.set_concurrency(1)
    else:
        d.set_rate(50.0, 4)
    await asyncio.sleep(1.0)
    summary, target = d.backoff, d.target
    await d.stop()
    gaps = [b - a for a, b in zip(client.sent, client.sent[1:], strict=False)]
    assert 2 <= len(client.sent) <= 5, client.sent  # ≈ one per 0.3 s, not 50/s
    assert min(gaps) >= 0.29
    assert summary.streams == 1 and summary.retry_after
    assert summary.describe().startswith("backing off 0.3 s after")
    assert target == (1 if mode == "closed" else 50.0)  # the level is kept, not reduced
