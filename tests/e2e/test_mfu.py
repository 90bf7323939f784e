"""Issue 28: MFU as a user gets it: vLLM's estimated FLOPs (the simulator's engine counts them
step by step) over the GPU's peak, the peak from the GPU telemetry's name (the simulator's
DCGM page says "NVIDIA RTX 6000 Ada") or ``--gpu-peak-tflops``; unknown, and said, without."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from infmon.commands.monitor import finish
from infmon.model.server.efficiency import MFU_UNKNOWN
from infmon.ui.panes.base import Body
from infmon.ui.panes.server import ServerPane
from tests.conftest import REPO, infmon_cmd
from tests.e2e.monitorkit import monitor_app, wait_until

pytestmark = pytest.mark.e2e

ADA_PEAK = 364.2e12


def bench(url: str, session: Path, *extra: str, levels: str = "16") -> dict:
    run = subprocess.run(
        infmon_cmd(
            *("bench", url, "--concurrency", levels, "--step-requests", "16"),
            *("--output-tokens", "64", "--warmup", "0", "--metrics-interval", "0.25"),
            *("--session-dir", str(session), *extra),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    return json.loads((session / "report.json").read_text())


def test_report_mfu_from_the_gpu_name_and_unknown_without_a_peak(sim_url, tmp_path: Path):
    doc = bench(sim_url, tmp_path / "gpu", "--gpu-metrics", f"{sim_url}/gpu-metrics", levels="1,16")
    rows = {r["label"]: r for r in doc["server_detail"]}
    low, high = rows["c=1"], rows["c=16"]
    for r in (low, high):
        assert r["peak_source"].startswith("RTX 6000 Ada datasheet")
        assert r["mfu"] == pytest.approx(r["flops_per_s_per_gpu"] / ADA_PEAK)
    # batching 16 streams does ~16x the FLOPs per second of one (decode is memory-bound)
    assert high["flops_per_s_per_gpu"] > 6 * low["flops_per_s_per_gpu"]
    print(f"\nMFU: c=1 {low['mfu']:.2%}, c=16 {high['mfu']:.2%} of 364.2 TFLOP/s")
    assert f"MFU peaks at {round(high['mfu'] * 100)}% (c=16;" in "\n".join(doc["diagnosis"])
    report = (tmp_path / "gpu" / "report.md").read_text()
    assert "| MFU |" in report
    # a flag wins over the name; no GPU telemetry and no flag: unknown, and said
    flagged = bench(sim_url, tmp_path / "flag", "--gpu-peak-tflops", "1000")
    assert all(r["peak_source"] == "--gpu-peak-tflops" for r in flagged["server_detail"])
    bare = bench(sim_url, tmp_path / "bare")
    assert all(r["mfu"] is None and r["flops_per_s_per_gpu"] for r in bare["server_detail"])
    assert MFU_UNKNOWN in bare["diagnosis"]


@pytest.mark.parametrize("gpu", [True, False])
def test_the_server_pane_shows_mfu_or_why_not(sim_url, tmp_path: Path, gpu: bool):
    extra = ["--gpu-metrics", f"{sim_url}/gpu-metrics"] if gpu else []
    app, recorder = monitor_app(
        *(sim_url, "--session-dir", str(tmp_path), *extra),
        *("--output-tokens", "24", "--scrape-interval", "0.3"),
    )
    seen: dict = {}

    async def drive() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("space", "right_square_bracket")

            def said() -> bool:  # on screen: the pane draws a snapshot after it is taken
                seen["pane"] = app.query_one(ServerPane).query_one(Body).last_text.plain
                return ("MFU " if gpu else "MFU unknown") in seen["pane"]

            await wait_until(said)
            await pilot.press("q")

    asyncio.run(drive())
    finish(app, recorder)
    print("\n" + seen["pane"])
    if gpu:
        assert "MFU " in seen["pane"] and "MFU unknown" not in seen["pane"]
    else:
        assert "MFU unknown (GPU peak not known: --gpu-peak-tflops)" in seen["pane"]
