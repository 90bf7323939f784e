"""The model's ``to_dict`` TypedDicts (issue 32, "no dict[str, Any]"): each says exactly the
keys its ``to_dict`` writes, so a key added to one and not the other is caught here (mypy
checks the values' types)."""

from __future__ import annotations

import typing

from infmon.model.server.families import (
    Estimates,
    KvOffload,
    LoraState,
    PdTransfer,
    ServerDetail,
    ServerDetailDict,
)
from infmon.model.server.snapshot import (
    GPU_NUMBERS,
    EngineSnapshot,
    GpuDict,
    GpuProcess,
    GpuSnapshot,
    ServerSnapshot,
    ServerSnapshotDict,
    SpecDecode,
    WindowStat,
)
from infmon.model.steps.book import StepEvent


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
