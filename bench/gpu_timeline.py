"""Memory and time of a report's GPU timeline (``infmon.model.server.gpu_steps.GpuTimeline``) per
GPU per scrape, against a reference measured in the same run: keeping each scrape's ``GpuRow``s (the
live pane's rows) in a list, as a first version did.

The scrapes are journal lines of the simulator's DCGM page in the ``contention`` scenario (one
GPU, two holders: the server pod and a neighbour), its engine run in virtual time.

    python bench/gpu_timeline.py            # 20,000 scrapes (5.5 h at 1 Hz)
    python bench/gpu_timeline.py --scrapes 2000
"""

from __future__ import annotations

import argparse
import time
import tracemalloc
from typing import Any

from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.gpu_state import GpuRow, GpuState
from infmon.model.server.gpu_steps import GpuTimeline, serving_pods
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sim.dcgm import DcgmSeries, Neighbour
from infmon.sim.engine import Engine, Sequence
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sources.exposition import parse_exposition
from infmon.sources.gpu import dcgm_gpus


def page() -> str:
    cfg = build_config(SCENARIOS["contention"], max_model_len=4096)
    engine = Engine(cfg)
    dcgm = DcgmSeries(cfg, engine.budget, neighbour=Neighbour.for_contention(cfg.contention))
    for i in range(64):
        engine.add(Sequence(f"r{i}", 256, 1000, None, 0.0))
    t = 0.0
    while t < 3.0:
        out = engine.step(t)
        dcgm.on_step(out)
        t = out.end_s if out.end_s > t else t + 0.001
    return dcgm.render(t).decode()


class RowList:
    """The reference: every scrape's rows kept as they are."""

    def __init__(self) -> None:
        self.state = GpuState()
        self.rows: list[tuple[float, tuple[GpuRow, ...]]] = []

    def add_scrape(self, s: dict[str, Any]) -> None:
        snap = s["snap"]
        gpus = tuple(GpuSnapshot.from_dict(g) for g in snap["gpus"])
        self.state.add_gpus(gpus, serving_pods(snap), s["t"])
        self.rows.append((s["t"], self.state.rows()))


def measure(make: Any, lines: list[dict[str, Any]]) -> tuple[float, float]:
    """(bytes retained per scrape, µs per scrape added without tracing)."""
    store = make()
    t0 = time.perf_counter()
    for line in lines:
        store.add_scrape(line)
    per_us = (time.perf_counter() - t0) / len(lines) * 1e6
    del store
    tracemalloc.start()
    store = make()
    for line in lines:
        store.add_scrape(line)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return held / len(lines), per_us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=20_000)
    n = ap.parse_args().scrapes
    gpus = tuple(dcgm_gpus(parse_exposition(page())))
    snap = ServerSnapshot(timestamp_s=0.0, gpus=gpus, gpu_source="dcgm").to_dict()
    lines = [{"t": float(t), "snap": snap} for t in range(n)]
    ref_b, ref_us = measure(RowList, lines)
    new_b, new_us = measure(GpuTimeline, lines)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"{n:,} scrapes, 1 GPU, 2 holders; load average {' '.join(load)}")
    print(f"reference (GpuRow list): {ref_b:7.0f} B/scrape  {ref_us:6.0f} µs/scrape")
    print(f"GpuTimeline (columns):   {new_b:7.0f} B/scrape  {new_us:6.0f} µs/scrape")
    print(f"ratio: memory {new_b / ref_b:.2f}×, time {new_us / ref_us:.2f}×")


if __name__ == "__main__":
    main()
