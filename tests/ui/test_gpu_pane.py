"""The GPU pane: filled from NVML (a fake ``pynvml`` module: the real one is not importable here),
from the simulator's DCGM page, quiet "no GPU data" without NVML, hidden without a GPU source
(issue 22, must show 4)."""

from __future__ import annotations

import asyncio
import sys
import types
from dataclasses import replace
from typing import Any

import pytest

from infmon.clock import FakeClock
from infmon.config import Config
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sources.nvml import NvmlReader, import_nvml
from infmon.sources.scraper import WithGpus, gpu_reader
from infmon.ui.panes import EventsPane, GpuPane
from infmon.ui.panes.base import Body
from tests.ui.conftest import make_app
from tests.ui.fakes import new_session

MIB = 2**20


class NVMLError(Exception):
    pass


def fake_pynvml(*, init_fails: bool = False) -> types.ModuleType:
    """The subset of nvidia-ml-py's ``pynvml`` infmon calls, answering for one H100 with two
    processes (vLLM and a neighbour), shaped as nvidia-ml-py returns them."""
    nv = types.ModuleType("pynvml")
    ns = types.SimpleNamespace
    procs = {4242: ("python3 -m vllm.entrypoints.openai.api_server", 71_000 * MIB, 61)}
    procs[5151] = ("python train.py", 3174 * MIB, 38)

    def init() -> None:
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def not_supported(*_: Any) -> Any:
        raise NVMLError("Not Supported")

    nv.NVMLError = NVMLError  # type: ignore[attr-defined]
    nv.NVML_CLOCK_SM = 1  # type: ignore[attr-defined]
    nv.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    funcs = {
        "nvmlInit": init,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ns(i=i),
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetUUID": lambda h: "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77",
        "nvmlDeviceGetMemoryInfo": lambda h: ns(
            total=81559 * MIB, free=7385 * MIB, used=74174 * MIB
        ),
        "nvmlDeviceGetUtilizationRates": lambda h: ns(gpu=99, memory=63),
        "nvmlDeviceGetPowerUsage": lambda h: 612_000,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetClockInfo": lambda h, kind: 1980,
        "nvmlDeviceGetMaxClockInfo": lambda h, kind: 1980,
        "nvmlDeviceGetTemperature": lambda h, sensor: 67,
        "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0,
        "nvmlDeviceGetCurrentClocksEventReasons": not_supported,  # older driver: the other name
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [
            ns(pid=pid, usedGpuMemory=mem) for pid, (_, mem, _) in procs.items()
        ],
        "nvmlDeviceGetProcessUtilization": lambda h, last: [
            ns(pid=pid, smUtil=sm, memUtil=0, timeStamp=1_000 + pid)
            for pid, (_, _, sm) in procs.items()
        ],
        "nvmlSystemGetProcessName": lambda pid: procs[pid][0].encode(),
    }
    for name, fn in funcs.items():
        setattr(nv, name, fn)
    return nv


def text_of(app: Any, pane: type) -> str:
    return app.query_one(pane).query_one(Body).last_text.plain


class _Server:
    """The server's own source (a scrape without GPU data)."""

    description = "http://127.0.0.1:8000/metrics"

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        return ServerSnapshot(timestamp_s=now_s, backend="vllm-v1", running=4.0, waiting=0.0)

    async def aclose(self) -> None:
        pass


async def scrape(reader: Any, now: float = 1.0) -> ServerSnapshot:
    return await WithGpus(_Server(), reader).snapshot(now)


def test_nvml_reader_reads_the_fake_module_field_by_field() -> None:
    got = NvmlReader(fake_pynvml()).read_sync()
    assert got.note is None
    (g,) = got.gpus
    assert (g.source, g.index, g.name) == ("nvml", "0", "NVIDIA H100 80GB HBM3")
    assert g.util_percent == 99 and g.mem_copy_util_percent == 63
    assert g.mem_used_mib == 74174 and g.mem_total_mib == 81559
    assert g.power_w == 612.0 and g.power_limit_w == 700.0
    assert g.sm_clock_mhz == 1980 and g.temp_c == 67 and g.throttle_reasons == ()
    vllm, train = g.processes  # largest first
    assert (vllm.pid, vllm.mem_used_mib, vllm.sm_percent) == (4242, 71_000, 61)
    assert (train.pid, train.name, train.sm_percent) == (5151, "python train.py", 38)


async def test_pane_filled_from_nvml_and_the_neighbour_diagnosed(clock: FakeClock) -> None:
    session = new_session(clock)
    reader = NvmlReader(fake_pynvml())
    session.set_paused(False, clock.now())
    for _ in range(3):
        clock.advance(1.0)
        snap = await WithGpus(_Server(), reader).snapshot(clock.now())
        session.add_server(snap, clock.now())
    clock.advance(1.0)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.render_tick()
        assert app.query_one(GpuPane).display
        text = text_of(app, GpuPane)
        assert "GPU 0 NVIDIA H100 80GB HBM3" in text
        assert "util" in text and "99%" in text and "mem 63%" in text
        assert "mem 72.4/79.6 GiB" in text and "612/700 W" in text and "1,980 MHz" in text
        assert "server 69.3G SM 61% python3 -m vllm" in text
        assert "other 3.1G SM 38% python train.py (pid 5151)" in text
        events = " ".join(text_of(app, EventsPane).split())  # the pane wraps whole entries
        assert (
            "GPU contention: another process on GPU 0 (python train.py (pid 5151): 3.1 GiB, "
            "SM 38%)" in events
        )


async def test_without_nvml_a_quiet_no_gpu_data(clock: FakeClock) -> None:
    assert import_nvml() is None  # the real nvidia-ml-py is not installed on this machine
    session = new_session(clock)
    snap = await scrape(NvmlReader())
    assert snap.gpus == () and snap.gpu_source == "nvml"
    assert snap.gpu_note == "no GPU data: NVML (nvidia-ml-py) is not installed here"
    broken = await scrape(NvmlReader(fake_pynvml(init_fails=True)))
    assert broken.gpu_note == "no GPU data: NVML not available (Driver Not Loaded)"
    session.add_server(snap, clock.now())
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.render_tick()
        assert app.query_one(GpuPane).display
        assert text_of(app, GpuPane) == "no GPU data: NVML (nvidia-ml-py) is not installed here"
        assert "error" not in text_of(app, EventsPane).lower()


async def test_no_gpu_source_no_pane(clock: FakeClock) -> None:
    session = new_session(clock)
    session.add_server(ServerSnapshot(timestamp_s=0.0, backend="vllm-v1", running=1.0), 0.0)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.render_tick()
        assert not app.query_one(GpuPane).display


def test_gpu_metrics_nvml_uses_pynvml_when_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    reader = gpu_reader("nvml", Config())
    assert isinstance(reader, NvmlReader)
    snap = asyncio.run(scrape(reader))
    assert [g.name for g in snap.gpus] == ["NVIDIA H100 80GB HBM3"] and snap.gpu_note is None
    assert replace(snap, gpus=()).gpus == ()
