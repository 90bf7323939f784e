"""Several load workers behind one engine (in process, a scripted client): the level split and
re-split, merged windows against the records, a lost worker, endpoints spread, gamma dealt."""

from __future__ import annotations

import asyncio
import itertools
import statistics

import pytest

from infmon.clock import MonotonicClock
from infmon.config import Config
from infmon.engine.controller import LoadEngine
from infmon.engine.link import InProcessLink
from infmon.engine.shares import ArrivalDealer, split_level
from infmon.engine.spread import LEAST_INFLIGHT, ROUND_ROBIN, SpreadClient
from infmon.engine.types import EngineError, RecordBatch
from infmon.model.steps.span import CLOSED, RATE, Level
from tests.enginekit import ScriptedClient, random_words, scripted


class Sink:
    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self.windows: list = []
        self.events: list[tuple[str, str]] = []
        self.losses: list = []

    @property
    def records(self):
        return [r for b in self.batches for r in b.records]


def engine_for(sink: Sink, workers: int, *, urls=(), spread=ROUND_ROBIN, **client) -> LoadEngine:
    return LoadEngine(
        Config(url="http://scripted", seed=5, arrival=client.pop("arrival", "poisson")),
        MonotonicClock(),
        on_records=sink.batches.append,
        on_window=sink.windows.append,
        on_event=lambda kind, text: sink.events.append((kind, text)),
        on_lost=sink.losses.append,
        workers=workers,
        client_factory=scripted(**client),
        workload_factory=random_words(output_tokens=10),
        urls=urls,
        spread=spread,
    )


def test_split_level_closed_and_rate() -> None:
    assert split_level(10, CLOSED, 3) == [4.0, 3.0, 3.0]
    assert split_level(2, CLOSED, 3) == [1.0, 1.0, 0.0]
    assert split_level(9.0, RATE, 3) == [3.0, 3.0, 3.0]


async def test_two_workers_share_a_level_and_windows_add_up_to_the_records() -> None:
    sink = Sink()
    engine = engine_for(sink, 2, ttft_s=0.004, itl_s=0.001)
    await engine.start()
    engine.set_level(1, Level(CLOSED, 5), 0.0)
    engine.resume(0.0)
    await asyncio.sleep(0.5)
    engine.pause()
    assert await engine.wait_idle(5.0)
    totals = await engine.stop()
    by_worker = {b.worker_id for b in sink.batches}
    assert by_worker == {0, 1}
    recs = sink.records
    assert len(recs) == totals.sent == totals.succeeded > 20
    windows = sink.windows
    assert sum(w.sent for w in windows) == totals.sent
    assert sum(w.finished for w in windows) == len(recs)
    # every request is labelled with the whole level, not the worker's share (3 or 2)
    assert {r.concurrency for r in recs} == {5}
    # worker 0 runs 3 streams, worker 1 runs 2: their request counts follow
    n0 = sum(len(b.records) for b in sink.batches if b.worker_id == 0)
    assert 1.2 < n0 / (len(recs) - n0) < 1.8


async def test_a_lost_worker_is_an_event_its_streams_are_worker_lost_and_the_rest_take_over() -> (
    None
):
    sink = Sink()
    engine = engine_for(sink, 2, ttft_s=0.05, itl_s=0.01)  # requests last ~0.15 s
    await engine.start()
    engine.set_level(1, Level(CLOSED, 8), 0.0)
    engine.resume(0.0)
    await asyncio.sleep(0.4)
    link = engine.links[1]
    assert isinstance(link, InProcessLink)
    await link.crash()
    for _ in range(50):
        if sink.losses:
            break
        await asyncio.sleep(0.02)
    [loss] = sink.losses
    assert loss.worker_id == 1 and loss.live_workers == 1 and loss.inflight == 4
    assert engine.live == [0]
    lost = [r for r in sink.records if r.error_kind == "worker_lost"]
    assert len(lost) == 4 and {r.step for r in lost} == {1}
    assert any(
        "worker 1 lost" in text and "4 streams in flight" in text and "`worker_lost`" in text
        for _, text in sink.events
    )
    t_loss = loss.t
    await asyncio.sleep(0.6)
    after = [w for w in sink.windows if w.worker_id == 0 and w.t0 >= t_loss + 0.2]
    assert after and statistics.mean(w.inflight for w in after) > 7  # worker 0 runs all 8
    engine.pause()
    assert await engine.wait_idle(5.0)  # the lost worker is not waited for
    totals = await engine.stop()
    assert totals.failed == 4


async def test_every_worker_lost_ends_the_waits() -> None:
    sink = Sink()
    engine = engine_for(sink, 1, ttft_s=0.05, itl_s=0.01)
    await engine.start()
    engine.set_level(1, Level(CLOSED, 2), 0.0)
    engine.limit_sends(1000)
    engine.resume(0.0)
    await asyncio.sleep(0.2)
    await engine.links[0].crash()
    await asyncio.wait_for(engine.budget_spent(), 2.0)
    assert "no load worker is left" in sink.losses[0].text
    await engine.stop()


@pytest.mark.parametrize("spread", [ROUND_ROBIN, LEAST_INFLIGHT])
async def test_endpoints_share_the_requests(spread: str) -> None:
    sink = Sink()
    urls = ("http://a", "http://b")
    engine = engine_for(sink, 1, urls=urls, spread=spread, ttft_s=0.004, itl_s=0.001)
    await engine.start()
    engine.set_level(1, Level(CLOSED, 4), 0.0)
    engine.resume(0.0)
    await asyncio.sleep(0.4)
    engine.pause()
    await engine.wait_idle(5.0)
    await engine.stop()
    eps = [e for b in sink.batches for e in (b.endpoints or ())]
    assert len(eps) == len(sink.records) > 20 and set(eps) == {0, 1}
    assert abs(eps.count(0) - eps.count(1)) <= 0.1 * len(eps)


async def test_spread_client_picks_by_least_inflight() -> None:
    fast, slow = ScriptedClient(ttft_s=0.001, itl_s=0.0), ScriptedClient(ttft_s=0.2, itl_s=0.0)
    client = SpreadClient([slow, fast], LEAST_INFLIGHT)
    await client.detect_capabilities()
    first = asyncio.ensure_future(client.stream(0, "x", 1, concurrency=2))
    await asyncio.sleep(0)
    for rid in range(1, 6):  # the slow endpoint is busy: every later request goes to the fast
        await client.stream(rid, "x", 1, concurrency=2)
    await first
    assert [client.endpoint_of[i] for i in range(6)] == [0, 1, 1, 1, 1, 1]
    assert client.meter is fast.meter is slow.meter and client.meter.tokens == 6


def test_dealt_gamma_arrivals_keep_their_rate_and_go_round_robin() -> None:
    dealer = ArrivalDealer(200.0, 10.0, shape=0.25, seed=3)
    dealt = dealer.deal(30.0, [0, 1, 2])
    n = sum(len(v) for v in dealt.values())
    assert 0.85 * 4000 < n < 1.15 * 4000
    assert max(len(v) for v in dealt.values()) - min(len(v) for v in dealt.values()) <= 1
    times = sorted(t for v in dealt.values() for t in v)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert cv > 1.6  # bursty: gamma shape 1/4 has CV 2 (Poisson would be 1)
    assert dealer.deal(30.0, [0, 1]) == {0: [], 1: []}  # nothing twice


async def test_gamma_over_two_workers_is_dealt_by_the_controller() -> None:
    sink = Sink()
    engine = engine_for(sink, 2, arrival="gamma", ttft_s=0.002, itl_s=0.0005)
    await engine.start()
    engine.set_level(1, Level(RATE, 100.0), 0.0)
    engine.resume(0.0)
    await asyncio.sleep(1.5)
    engine.pause()
    await engine.wait_idle(5.0)
    await engine.stop()
    recs = sink.records
    assert 100 <= len(recs) <= 200 and {r.rate for r in recs} == {100.0}
    assert {b.worker_id for b in sink.batches} == {0, 1}


async def test_a_worker_that_fails_to_start_is_an_error_not_a_wait() -> None:
    async def broken(config: Config):
        raise AttributeError("no such field")

    engine = LoadEngine(
        Config(url="http://scripted", seed=5),
        MonotonicClock(),
        on_records=lambda batch: None,
        workers=2,
        client_factory=scripted(),
        workload_factory=broken,
    )
    with pytest.raises(EngineError, match="failed to start: AttributeError: no such field"):
        await asyncio.wait_for(engine.start(), 10)
    await engine.stop()
