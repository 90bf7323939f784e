"""The model's ``to_dict`` TypedDicts (issue 32, "no dict[str, Any]"): each says exactly the
keys its ``to_dict`` writes, so a key added to one and not the other is caught here (mypy
checks the values' types)."""

from __future__ import annotations

import dataclasses
import typing

from infmon.model.live.session_replay import snapshot_of
from infmon.model.server.families import (
    Estimates,
    KvOffload,
    LoraState,
    PdTransfer,
    ServerDetail,
    ServerDetailDict,
)
from infmon.model.server.gpu import GPU_NUMBERS, GpuDict, GpuProcess, GpuSnapshot
from infmon.model.server.snapshot import (
    EngineSnapshot,
    ServerSnapshot,
    ServerSnapshotDict,
    SpecDecode,
    WindowStat,
)
from infmon.model.steps.span import StepEvent


def _keys(tp: object) -> set[str]:
    return set(typing.get_type_hints(tp))


def test_a_snapshots_dict_has_exactly_its_typed_keys() -> None:
    gpu = GpuSnapshot("dcgm", "0", processes=(GpuProcess("vllm"),))
    detail = ServerDetail(
        kv_offload=KvOffload(), pd_transfer=PdTransfer(), lora=LoraState(), estimates=Estimates()
    )
    snap = ServerSnapshot(
        timestamp_s=1.0,
        latency_s={"ttft": WindowStat()},
        spec_decode=SpecDecode(),
        engines=(EngineSnapshot((("engine", "0"),)),),
        gpus=(gpu,),
        detail=detail,
    )
    d = snap.to_dict()
    assert set(d) == _keys(ServerSnapshotDict)
    assert list(d)[-len(_keys(ServerDetailDict)) :] == list(detail.to_dict())
    for part in ("kv_offload", "pd_transfer", "lora", "estimates"):
        hints = typing.get_type_hints(ServerDetailDict)[part]
        assert set(d[part]) == _keys(typing.get_args(hints)[0])
    assert d["engines"][0].keys() == _keys(typing.get_type_hints(EngineSnapshot.to_dict)["return"])


def test_a_gpus_numbers_keep_gpu_numbers_order() -> None:
    d = GpuSnapshot("nvml", "1").to_dict()
    head = ["source", "index", "name", "uuid", "hostname", "mig_profile"]
    assert list(d) == [*head, *GPU_NUMBERS, "throttle_reasons", "processes", "labels"]
    assert set(d) == _keys(GpuDict)


def test_a_step_events_payload_is_its_typed_keys() -> None:
    begin = StepEvent("begin", 3, 1.5, "closed", 8.0, "sweep", 2.0, revisit_of=1, clean=False)
    assert list(begin.payload()) == [
        "index", "t", "mode", "level", "origin", "revisit_of", "warmup_s", "clean",
    ]  # fmt: skip
    assert StepEvent("pause", 3, 2.0).payload() == {"index": 3, "t": 2.0}


def test_a_journal_scrape_replays_as_the_snapshot_it_was() -> None:
    """``session_replay.snapshot_of`` names each field it reads back: every number the
    snapshot has (by the rule the replay once computed them with) comes back from its dict."""
    numbers = [
        f.name
        for f in dataclasses.fields(ServerSnapshot)
        if f.name.endswith(("_total", "_per_s", "_rate", "_usage"))
        or f.name in ("running", "waiting", "window_s")
    ]
    numbers.remove("requests_finished_total")  # a mapping, not a number
    ints = ["max_model_len", "kv_capacity_tokens", "kv_block_size_tokens", "kv_num_gpu_blocks"]
    snap = ServerSnapshot(
        timestamp_s=3.0,
        backend="vllm-v1",
        backend_version="0.32",
        models=("m",),
        latency_s={"ttft": WindowStat(1.0, 2.0, 3.0, 4.0, 5.0)},
        spec_decode=SpecDecode(drafts_total=4.0, acceptance_per_position=(0.5, 0.25)),
        cache_config={"block_size": "16"},
        **{k: float(i + 1) for i, k in enumerate(numbers)},
        **{k: 16 * (i + 1) for i, k in enumerate(ints)},
    )
    back = snapshot_of(3.0, snap.to_dict())
    assert back == snap
    assert snapshot_of(1.0, {"running": "3", "models": "m", "latency_s": []}) == ServerSnapshot(1.0)
