"""The poller: failures become data, backoff grows and resets, restarts are surfaced."""

from __future__ import annotations

import asyncio

import pytest

from infmon.clock import FakeClock
from infmon.model.server.snapshot import ServerSnapshot, SourceState
from infmon.sources.errors import SourceError
from infmon.sources.poller import MetricPoller


class ScriptedSource:
    """Answers from a script: a snapshot factory or an exception per call."""

    description = "scripted"

    def __init__(self, script: list[object]) -> None:
        self.script = list(script)

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        assert isinstance(item, dict)
        return ServerSnapshot(timestamp_s=now_s, **item)

    async def aclose(self) -> None:
        pass


def make(script: list[object], clock: FakeClock) -> tuple[MetricPoller, list[ServerSnapshot]]:
    seen: list[ServerSnapshot] = []
    return MetricPoller(ScriptedSource(script), 1.0, seen.append, clock, max_backoff_s=8.0), seen


async def test_failure_goes_stale_then_down_then_recovers() -> None:
    clock = FakeClock()
    err = SourceError(SourceError.CONNECT, "refused")
    poller, seen = make([{"running": 3.0}, err, err, {"running": 4.0}], clock)
    await poller.poll_once()
    clock.advance(1.0)
    await poller.poll_once()
    assert seen[-1].state == SourceState.STALE
    assert seen[-1].running == 3.0 and seen[-1].error_kind == "connect"
    assert poller.next_delay_s() == 1.0
    clock.advance(20.0)
    await poller.poll_once()
    assert seen[-1].state == SourceState.DOWN and seen[-1].running is None
    assert poller.next_delay_s() == 2.0
    await poller.poll_once()
    assert seen[-1].state == SourceState.OK and seen[-1].running == 4.0
    assert poller.next_delay_s() == 1.0


async def test_backoff_is_capped() -> None:
    clock = FakeClock()
    poller, _ = make([SourceError(SourceError.TIMEOUT, "t")] * 10, clock)
    for _ in range(10):
        await poller.poll_once()
    assert poller.next_delay_s() == 8.0


async def test_no_metrics_is_its_own_state_not_an_error_storm() -> None:
    clock = FakeClock()
    poller, seen = make([SourceError(SourceError.NO_METRICS, "404")] * 3, clock)
    for _ in range(3):
        await poller.poll_once()
    assert {s.state for s in seen} == {SourceState.NO_METRICS}
    assert poller.next_delay_s() > 1.0


async def test_unexpected_exception_is_data() -> None:
    poller, seen = make([RuntimeError("boom")], FakeClock())
    await poller.poll_once()
    assert seen[0].state == SourceState.DOWN
    assert seen[0].error_kind == "other" and "boom" in (seen[0].error_message or "")


async def test_restart_counted_and_run_loops_until_cancelled() -> None:
    clock = FakeClock()
    sleeps: list[float] = []

    async def fake_sleep(dt: float) -> None:
        sleeps.append(dt)
        clock.advance(dt)
        if len(sleeps) == 3:
            raise asyncio.CancelledError

    seen: list[ServerSnapshot] = []
    source = ScriptedSource([{}, {"server_restarted": True}, {}])
    poller = MetricPoller(source, 0.5, seen.append, clock, sleep=fake_sleep)
    with pytest.raises(asyncio.CancelledError):
        await poller.run()
    assert poller.restarts == 1
    assert [s.timestamp_s for s in seen] == [0.0, 0.5, 1.0]
    assert [s.server_restarted for s in seen] == [False, True, False]


def test_snapshot_to_dict_keys_and_unknowns() -> None:
    snap = ServerSnapshot(timestamp_s=1.0)
    d = snap.to_dict()
    for key in (
        "backend",
        "schema_version",
        "models",
        "running",
        "waiting",
        "kv_cache_usage",
        "prefix_cache_hit_rate",
        "preemptions_total",
        "prompt_tokens_total",
        "generation_tokens_total",
        "spec_decode",
        "cache_config",
        "kv_capacity_tokens",
        "engines",
    ):
        assert key in d
    assert d["running"] is None and d["spec_decode"] is None and d["kv_capacity_tokens"] is None


def test_kv_capacity_seqs_counts_whole_blocks() -> None:
    snap = ServerSnapshot(
        timestamp_s=0.0,
        kv_capacity_tokens=8192 * 16,
        kv_block_size_tokens=16,
        kv_num_gpu_blocks=8192,
    )
    # 300 + 100 tokens = 25 blocks of 16 → 8192 // 25 = 327 sequences
    assert snap.kv_capacity_seqs(300, 100) == 327.0
    no_blocks = ServerSnapshot(timestamp_s=0.0, kv_capacity_tokens=4000)
    assert no_blocks.kv_capacity_seqs(300, 100) == 10.0
    assert ServerSnapshot(timestamp_s=0.0).kv_capacity_seqs(1, 1) is None
