"""The load driver with a fake stream client: level changes, faults held, clean fast stop."""

from __future__ import annotations

import asyncio
import time

import pytest

from infmon.clock import MonotonicClock
from infmon.load.driver import LoadDriver
from infmon.load.workload.words import RandomWords as Workload
from infmon.model.records.request import ErrorKind, RequestRecord


class FakeStreamClient:
    """Takes ``latency_s`` per request; every ``fail_every``-th request fails; hangs if told."""

    def __init__(
        self, latency_s: float = 0.02, fail_every: int = 0, hang: bool = False, raise_every: int = 0
    ) -> None:
        self.latency_s, self.fail_every, self.hang, self.raise_every = (
            latency_s,
            fail_every,
            hang,
            raise_every,
        )
        self.clock = MonotonicClock()
        self.kwargs: list[dict] = []
        self.max_inflight = 0
        self._inflight = 0

    async def stream(self, rid, prompt, out, *, on_cancel=None, **kw) -> RequestRecord:
        self.kwargs.append(kw)
        sent = self.clock.now()
        self._inflight += 1
        self.max_inflight = max(self.max_inflight, self._inflight)
        try:
            if self.raise_every and rid % self.raise_every == 0:
                raise RuntimeError("client bug")
            await asyncio.sleep(3600 if self.hang else self.latency_s)
        except asyncio.CancelledError:
            if on_cancel:
                on_cancel(
                    RequestRecord(
                        request_id=rid,
                        sent_s=sent,
                        end_s=self.clock.now(),
                        error_kind=ErrorKind.CANCELLED,
                        **kw,
                    )
                )
            raise
        finally:
            self._inflight -= 1
        t = self.clock.now()
        if self.fail_every and rid % self.fail_every == 0:
            return RequestRecord(
                request_id=rid, sent_s=sent, end_s=t, error_kind=ErrorKind.RESET, **kw
            )
        return RequestRecord(
            request_id=rid, sent_s=sent, chunk_times_s=(t,), end_s=t, output_tokens=1, **kw
        )


def make(client: FakeStreamClient) -> tuple[LoadDriver, list[RequestRecord]]:
    records: list[RequestRecord] = []
    d = LoadDriver(
        client, Workload(prompt_tokens=4, output_tokens=(2, 2)), records.append, MonotonicClock()
    )
    return d, records


async def until(cond, timeout_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_grows_at_once_and_shrinks_as_requests_finish() -> None:
    client = FakeStreamClient(latency_s=0.05)
    d, records = make(client)
    d.start()
    d.set_concurrency(4)
    await asyncio.sleep(0.01)
    assert d.inflight == 4 and d.mode == "closed" and d.target == 4
    d.set_concurrency(10)
    await asyncio.sleep(0.01)
    assert d.inflight == 10
    d.set_concurrency(2)
    await until(lambda: d.inflight == 2)
    await asyncio.sleep(0.2)
    assert d.inflight == 2 and client.max_inflight == 10
    await d.stop()
    assert {kw["concurrency"] for kw in client.kwargs} == {4, 10, 2}
    assert d.sent == d.succeeded + d.failed + d.cancelled == len(records)


async def test_failures_are_records_and_the_level_is_held() -> None:
    client = FakeStreamClient(latency_s=0.01, fail_every=3, raise_every=7)
    d, records = make(client)
    d.set_concurrency(3)
    await asyncio.sleep(0.3)
    # Held: three streams still exist (one may be waiting out its backoff after a failure).
    assert d.target == 3 and len(d._workers) == 3 and client.max_inflight >= 2
    await d.stop()
    kinds = {r.error_kind for r in records}
    assert {ErrorKind.RESET, ErrorKind.OTHER, None} <= kinds
    assert d.failed > 0 and d.succeeded > 0


async def test_stop_cancels_hung_streams_within_two_seconds_and_accounts_for_all() -> None:
    d, records = make(FakeStreamClient(hang=True))
    d.start()
    d.set_concurrency(8)
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    await d.stop()
    assert time.monotonic() - t0 < 2.0
    assert d.cancelled == 8 and len(records) == 8 and d.inflight == 0
    assert all(r.error_kind == ErrorKind.CANCELLED for r in records)


async def test_stop_without_cancel_lets_inflight_finish() -> None:
    d, records = make(FakeStreamClient(latency_s=0.1))
    d.set_concurrency(3)
    await asyncio.sleep(0.02)
    await d.stop(cancel_inflight=False)
    assert d.cancelled == 0 and d.succeeded == 3 and len(records) == 3


async def test_pause_and_resume() -> None:
    d, records = make(FakeStreamClient(latency_s=0.02))
    d.set_concurrency(3)
    await asyncio.sleep(0.05)
    d.pause()
    assert await d.wait_idle(1.0)
    n = len(records)
    await asyncio.sleep(0.1)
    assert len(records) == n
    d.resume()
    await until(lambda: len(records) > n + 3)
    await d.stop()


async def test_open_loop_rate_and_concurrency_cap() -> None:
    client = FakeStreamClient(latency_s=0.01)
    d, _records = make(client)
    d.set_rate(100.0, max_concurrency=50)
    await asyncio.sleep(1.0)
    await d.stop()
    assert d.mode == "idle"
    assert 60 <= d.sent <= 150
    assert all(kw["rate"] == 100.0 and kw["concurrency"] is None for kw in client.kwargs)

    slow = FakeStreamClient(latency_s=0.3)
    d2, _ = make(slow)
    d2.set_rate(200.0, max_concurrency=5, arrival="gamma", burstiness=0.5)
    await asyncio.sleep(0.5)
    await d2.stop()
    assert slow.max_inflight == 5


async def test_steps_and_warmup_flags() -> None:
    d, records = make(FakeStreamClient(latency_s=0.02))
    assert d.next_step(warmup_s=0.1) == 1
    d.set_concurrency(1)
    await asyncio.sleep(0.3)
    await d.stop()
    assert all(r.step == 1 for r in records)
    flags = [r.warmup for r in records if r.error_kind is None]
    assert flags[0] and not flags[-1]
    assert flags == sorted(flags, reverse=True)


async def test_loop_lag_and_achieved_concurrency_self_check() -> None:
    d, _ = make(FakeStreamClient(latency_s=0.05))
    d.start()
    d.set_concurrency(4)
    await asyncio.sleep(0.4)
    assert d.achieved_concurrency(window_s=0.3) == pytest.approx(4.0, abs=0.3)
    calm = d.loop_lag_p99_s()
    time.sleep(0.2)  # block the loop on purpose
    await asyncio.sleep(0.1)
    assert d.loop_lag_p99_s() > 0.1 > calm
    await d.stop()
