"""Issue 31: a lost worker replaced by a new one (``--ray-restart``'s engine side), with real
workers in process and a scripted client: the new worker takes its share once it has found
the model, the events say both steps, and a replacement that cannot start leaves the level
re-split over the survivors, said."""

from __future__ import annotations

import asyncio
import statistics

from infmon.clock import MonotonicClock
from infmon.config import Config
from infmon.engine.controller import LoadEngine
from infmon.engine.link import InProcessLink, WorkerLink
from infmon.engine.restart import WorkerJoin
from infmon.model.steps.span import CLOSED, Level
from tests.enginekit import random_words, scripted
from tests.unit.test_engine_workers import Sink


async def poll_until_async(probe, timeout_s: float, what: str) -> None:
    """Await until ``probe()`` is truthy (the loop runs the workers meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, f"waited {timeout_s} s for {what}"
        await asyncio.sleep(0.02)


def _engine(sink: Sink, joins: list[WorkerJoin], replacement) -> LoadEngine:
    return LoadEngine(
        Config(url="http://scripted", seed=5),
        MonotonicClock(),
        on_records=sink.batches.append,
        on_window=sink.windows.append,
        on_event=lambda kind, text: sink.events.append((kind, text)),
        on_lost=sink.losses.append,
        workers=2,
        client_factory=scripted(ttft_s=0.05, itl_s=0.01),
        workload_factory=random_words(output_tokens=10),
        replacement=replacement,
        on_joined=joins.append,
    )


async def _lose_worker_1(engine: LoadEngine, sink: Sink) -> None:
    await engine.start()
    engine.set_level(1, Level(CLOSED, 8), 0.0)
    engine.resume(0.0)
    await poll_until_async(lambda: any(w.worker_id == 1 for w in sink.windows), 5, "windows")
    link = engine.links[1]
    assert isinstance(link, InProcessLink)
    await link.crash()
    await poll_until_async(lambda: sink.losses, 5, "the loss")


async def test_a_lost_worker_is_replaced_and_the_new_one_takes_its_share() -> None:
    sink, joins = Sink(), []
    asked: list[tuple[int, int]] = []

    def replacement(new: int, lost: WorkerLink) -> WorkerLink:
        asked.append((new, lost.worker_id))
        return InProcessLink(new, scripted(ttft_s=0.05, itl_s=0.01), random_words(output_tokens=10))

    engine = _engine(sink, joins, replacement)
    await _lose_worker_1(engine, sink)
    [loss] = sink.losses
    assert loss.replacing and "re-split over 1 worker until its replacement joins" in loss.text
    await poll_until_async(lambda: joins, 5, "the replacement")
    [join] = joins
    assert asked == [(2, 1)]
    assert join.error is None and join.worker_id == 2 and join.replaces == 1
    assert join.text == "worker 2 (in process) replaces worker 1: c=8 re-split over 2 workers"
    assert ("load", join.text) in sink.events
    assert engine.live == [0, 2]
    t_join = join.t
    await poll_until_async(
        lambda: len([w for w in sink.windows if w.worker_id == 2 and w.t0 >= t_join + 0.2]) >= 3,
        5,
        "the new worker's windows",
    )
    after = [w for w in sink.windows if w.t0 >= t_join + 0.2]
    for worker in (0, 2):  # 8 streams split 4 / 4 again
        mine = [w.inflight for w in after if w.worker_id == worker]
        assert mine and 3 <= statistics.mean(mine) <= 5, (worker, mine)
    engine.pause()
    assert await engine.wait_idle(5.0)
    totals = await engine.stop()
    new = [r for b in sink.batches if b.worker_id == 2 for r in b.records]
    assert new and {r.concurrency for r in new} == {8}  # labelled with the whole level
    assert totals.succeeded == sum(1 for r in sink.records if r.ok)


async def test_a_replacement_that_cannot_start_leaves_the_level_on_the_survivors() -> None:
    sink, joins = Sink(), []

    async def broken(config: Config):
        raise OSError("the tokenizer is gone")

    engine = _engine(
        sink, joins, lambda new, lost: InProcessLink(new, scripted(), broken)
    )  # fmt: skip
    await _lose_worker_1(engine, sink)
    await poll_until_async(lambda: joins, 5, "the replacement's failure")
    [join] = joins
    assert join.error is not None and "the tokenizer is gone" in join.error
    assert join.text.startswith("worker 2 could not replace worker 1 (")
    assert join.text.endswith("c=8 stays over 1 worker")
    assert ("error", join.text) in sink.events
    assert engine.live == [0]
    engine.pause()
    assert await engine.wait_idle(5.0)
    await engine.stop()


async def test_without_a_replacement_the_share_stays_re_split() -> None:
    sink, joins = Sink(), []
    engine = _engine(sink, joins, None)
    await _lose_worker_1(engine, sink)
    [loss] = sink.losses
    assert not loss.replacing and loss.text.endswith("c=8 re-split over 1 worker")
    assert engine.live == [0] and len(engine.links) == 2
    engine.pause()
    assert await engine.wait_idle(5.0)
    await engine.stop()
    assert not joins
