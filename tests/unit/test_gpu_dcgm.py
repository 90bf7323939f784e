"""DCGM exporter pages → one GpuSnapshot per GPU / MIG instance, exactly as the real captures say
(issue 22, must show 1). Every fixture is a real page pasted in a public thread (its .source.txt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infmon.model.server.gpu import GpuSnapshot
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import parse_exposition
from infmon.sources.gpu import dcgm_gpus, is_blank, reading, throttle_names
from infmon.sources.readings import read_page

METRICS = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def gpus_of(name: str) -> dict[str, GpuSnapshot]:
    gpus = dcgm_gpus(parse_exposition((METRICS / name).read_text()))
    by_index = {g.index: g for g in gpus}
    assert len(by_index) == len(gpus), "two GPUs merged into one index"
    return by_index


def test_every_fixture_has_its_source_note() -> None:
    for page in METRICS.glob("dcgm-*.prom"):
        note = page.with_suffix(".source.txt")
        assert note.exists() and "URL: https://github.com/NVIDIA/dcgm-exporter" in note.read_text()


def test_v100_four_gpus_on_one_host_values_as_pasted() -> None:
    g = gpus_of("dcgm-exporter-issue250-v100-hostname.prom")
    assert sorted(g) == ["0", "1", "2", "3"]
    assert {x.hostname for x in g.values()} == {"r6i3n0"}
    assert {x.name for x in g.values()} == {"Tesla V100-SXM2-32GB"}
    assert g["0"].uuid == "GPU-a6158b59-2c1e-1e63-0068-9178c4298abd"
    assert g["0"].util_percent == 0.0 and g["0"].activity == 0.0
    assert g["2"].power_limit_w == 300.0 and g["3"].power_limit_w == 300.0
    assert g["0"].power_limit_w is None and g["1"].power_limit_w is None
    for x in g.values():  # this part of the page has no framebuffer nor power draw: unknown
        assert x.mem_used_mib is None and x.mem_total_mib is None and x.power_w is None
    assert g["1"].activity is None and g["1"].util_percent is None


A30 = "yg-data-k8s-gpu-a30-node-test-test0003.mt"


def test_a30_mig_instances_kept_apart_with_memory_activity_power() -> None:
    g = gpus_of("dcgm-exporter-issue317-a30-mig.prom")
    assert sorted(g) == ["0/3", "0/4", "0/5", "0/6", "1/3", "1/4"]
    power = {"0/3": 52.636, "0/4": 52.636, "0/5": 52.746, "0/6": 52.746}
    power |= {"1/3": 56.121, "1/4": 56.127}
    for idx, x in g.items():
        assert x.hostname == A30 and x.name == "NVIDIA A30" and x.mig_profile == "1g.6gb"
        assert x.mem_used_mib == 3.0 and x.mem_free_mib == 6012.0 and x.mem_total_mib == 6015.0
        assert x.power_w == power[idx]
        assert x.util_percent is None  # MIG slices publish no GPU_UTIL
    for idx in ("0/3", "0/4", "0/5", "0/6", "1/3"):
        assert g[idx].engine_active == 0.0 and g[idx].tensor_active == 0.0
    assert g["1/4"].engine_active is None and g["1/4"].activity is None  # past the excerpt
    assert g["0/3"].uuid == "GPU-265c9814-6156-355b-e589-ff2064894f16"
    assert g["1/3"].uuid == "GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49"


def test_h100_mig_on_kubernetes_pods_are_holders_not_identity() -> None:
    g = gpus_of("dcgm-exporter-issue512-h100-mig-k8s.prom")
    assert sorted(g) == ["0/7", "0/8", "0/9"]
    assert all(x.engine_active == 0.0 and x.mig_profile == "1g.10gb" for x in g.values())
    assert all(x.hostname == "gsrh100-074" for x in g.values())
    assert [p.name for p in g["0/7"].processes] == [
        "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl"
    ]
    assert g["0/7"].processes[0].namespace == "model-playground-stg"
    assert g["0/7"].processes[0].container == "kserve-container"
    assert g["0/8"].processes == ()
    assert [p.name for p in g["0/9"].processes] == [
        "tts-predictor-00011-deployment-5554f75554-8j8pl"
    ]
    for x in g.values():  # the issue itself: FB_* missing on MIG instances; no power either
        assert x.mem_used_mib is None and x.mem_total_mib is None and x.power_w is None


def test_redacted_uuids_still_give_five_gpus() -> None:
    g = gpus_of("dcgm-exporter-issue512-h100-redacted-uuid.prom")
    assert sorted(g) == ["0/1", "0/2", "1", "2", "3"]
    assert {x.uuid for x in g.values()} == {"GPU-********"}
    assert {i: x.mem_temp_c for i, x in g.items()} == {
        "0/1": 43.0,
        "0/2": 43.0,
        "1": 42.0,
        "2": 38.0,
        "3": 41.0,
    }
    assert [p.name for p in g["1"].processes] == ["ollama-76f687f4cd-xcvvp"]
    assert g["0/1"].processes == ()


def test_mixed_models_on_one_node() -> None:
    g = gpus_of("dcgm-exporter-pr736-mixed-models.prom")
    assert sorted(g) == ["1", "2/3"]
    assert g["1"].name == "NVIDIA RTX 2000 Ada Generation" and g["1"].mig_profile is None
    assert g["2/3"].name == "NVIDIA A30" and g["2/3"].mig_profile == "1g.6gb"
    assert g["1"].mem_free_mib == 11275.0 and g["2/3"].mem_free_mib == 2207.0
    for x in g.values():
        assert x.hostname == "dcgm-exporter-wwwjh"  # lower-case label of newer exporters
        assert x.mem_used_mib is None and x.mem_total_mib is None  # no FB_USED: no total
        assert x.activity is None  # decoder/encoder utilisation is not SM activity
    assert [p.name for p in g["2/3"].processes] == ["triton-server-f7cb5d77-95xcf"]


def test_dcgm_page_read_as_a_server_page_gives_gpus_only() -> None:
    page = parse_exposition((METRICS / "dcgm-exporter-issue317-a30-mig.prom").read_text())
    snap = snapshot_of_page(page)
    assert len(snap.gpus) == 6 and snap.running is None and snap.generation_tokens_total is None
    assert read_page(page).gpus == snap.gpus


def test_blank_sentinels_and_out_of_range_values_stay_absent() -> None:
    blanks = (9223372036854775794.0, 2147483632.0, 2147483646.0, 140737488355328.0)
    assert all(is_blank(v) for v in blanks)
    assert not is_blank(2147483632.0, "counter")  # a µs counter can reach 2^31
    assert reading(4294967295.0, "percent") is None and reading(150.0, "percent") is None
    assert reading(1.2, "ratio") is None and reading(-1.0, "amount") is None
    assert reading(0.73, "ratio") == 0.73
    page = parse_exposition(
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-x"} 9223372036854775794\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 4294967295\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x"} 140737488355328\n'
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-x"} 1410\n'
    )
    (g,) = dcgm_gpus(page)
    assert g.mem_used_mib is None and g.util_percent is None and g.power_w is None
    assert g.sm_clock_mhz == 1410.0


def test_throttle_bitmask_decoded() -> None:
    assert throttle_names(None) is None
    assert throttle_names(0) == ()
    assert throttle_names(0x4 | 0x40) == ("power cap", "thermal (hw)")


def shared_page(device_series: bool) -> str:
    """A time-shared GPU as dcgm-exporter 4.6 prints it with --kubernetes-virtual-gpus."""
    ids = 'gpu="0",UUID="GPU-1",modelName="NVIDIA H100 80GB HBM3",Hostname="n1"'
    a = ids + ',pod="vllm-0",namespace="llm",container="vllm",vgpu="0"'
    b = ids + ',pod="trainer-7",namespace="ml",container="t",vgpu="1"'
    lines = [
        f"DCGM_FI_DEV_FB_USED{{{a}}} 70000",
        f"DCGM_FI_DEV_FB_USED{{{b}}} 3174",
        f"DCGM_FI_DEV_GPU_UTIL{{{a}}} 55",
        f"DCGM_FI_DEV_GPU_UTIL{{{b}}} 40",
        f"DCGM_FI_DEV_POWER_USAGE{{{a}}} 612.5",
        f"DCGM_FI_DEV_POWER_USAGE{{{b}}} 612.5",
        f"DCGM_FI_PROF_DRAM_ACTIVE{{{a}}} 0.62",
        f"DCGM_FI_PROF_DRAM_ACTIVE{{{b}}} 0.62",
    ]
    if device_series:
        lines += [f"DCGM_FI_DEV_FB_USED{{{ids}}} 73174", f"DCGM_FI_DEV_GPU_UTIL{{{ids}}} 95"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("device_series", [True, False])
def test_time_shared_gpu_per_pod_values_and_device_copies(device_series: bool) -> None:
    (g,) = dcgm_gpus(parse_exposition(shared_page(device_series)))
    assert g.power_w == 612.5 and g.dram_active == 0.62  # copied to every pod: the device's
    pods = {p.name: p for p in g.processes}
    assert pods["vllm-0"].mem_used_mib == 70000 and pods["vllm-0"].sm_percent == 55
    assert pods["trainer-7"].mem_used_mib == 3174 and pods["trainer-7"].sm_percent == 40
    assert pods["trainer-7"].namespace == "ml"
    if device_series:
        assert g.mem_used_mib == 73174 and g.util_percent == 95
    else:  # per-pod figures only: the device's own total is not on the page
        assert g.mem_used_mib is None and g.util_percent is None


def test_round_trip_through_the_journal_dict() -> None:
    (g,) = dcgm_gpus(parse_exposition(shared_page(True)))
    assert GpuSnapshot.from_dict(g.to_dict()) == g
