"""MFU: the GPU's peak from its reported name or a flag, and vLLM's estimated FLOP/s over it."""

from __future__ import annotations

import pytest

from infmon.model.server.efficiency import Peak, mfu, peak_tflops_of, resolve_peak
from infmon.model.server.families import Estimates, ServerDetail, detail_view
from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.snapshot import EngineSnapshot, ServerSnapshot
from infmon.sources.detail import with_mfu


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", 989.0),  # DCGM's modelName of an SXM card
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.05),
        ("NVIDIA L4", 121.0),
        ("NVIDIA RTX 6000 Ada Generation", 364.2),
        ("NVIDIA RTX 6000 Ada", 364.2),  # the simulator's DCGM page
        ("Tesla T4", None),
        ("", None),
    ],
)
def test_peak_from_the_gpus_name(name: str, tflops: float | None) -> None:
    got = peak_tflops_of(name)
    assert (got[0] if got else None) == tflops


def test_a_flag_wins_and_mixed_or_unknown_gpus_give_no_peak() -> None:
    assert resolve_peak(500.0, ["NVIDIA L4"]) == Peak(500e12, "--gpu-peak-tflops")
    assert resolve_peak(None, ["NVIDIA L4", "NVIDIA L4"]) == Peak(
        121e12, "L4 datasheet: 121 dense BF16 TFLOPs"
    )
    assert resolve_peak(None, ["NVIDIA L4", "NVIDIA L40S"]) is None
    assert resolve_peak(None, ["NVIDIA L4", "Tesla T4"]) is None
    assert resolve_peak(None, []) is None
    assert mfu(None, Peak(1e12, "x")) is None and mfu(5e11, None) is None
    assert mfu(5e11, Peak(1e12, "x")) == 0.5


def _snap(flops_per_s: float | None, gpus: tuple[str, ...], engines: int = 1) -> ServerSnapshot:
    return ServerSnapshot(
        timestamp_s=0.0,
        gpus=tuple(GpuSnapshot(source="dcgm", index=str(i), name=n) for i, n in enumerate(gpus)),
        engines=tuple(EngineSnapshot(labels=(("endpoint", str(i)),)) for i in range(engines)),
        detail=ServerDetail(estimates=Estimates(flops_total=1e15, flops_per_s=flops_per_s)),
    )


def test_the_snapshot_carries_mfu_per_gpu_and_the_pane_view_says_when_unknown() -> None:
    est = with_mfu(_snap(72.84e12, ("NVIDIA RTX 6000 Ada",)), None).detail.estimates
    assert est is not None and est.mfu == pytest.approx(0.2) and est.peak_flops_per_gpu == 364.2e12
    # a fleet of two pods: their summed FLOP/s over two GPUs
    fleet = with_mfu(_snap(72.84e12, ("NVIDIA RTX 6000 Ada",) * 2, engines=2), None)
    assert fleet.detail.estimates is not None
    assert fleet.detail.estimates.mfu == pytest.approx(0.1)
    unknown = with_mfu(_snap(1e12, ()), None)
    view = detail_view(unknown.detail)
    assert view is not None and view.mfu_unknown and view.mfu != view.mfu
    # one page (no rate yet): nothing to say
    first = detail_view(with_mfu(_snap(None, ()), None).detail)
    assert first is not None and not first.mfu_unknown
    assert with_mfu(ServerSnapshot(timestamp_s=0.0), 300.0).detail.estimates is None
