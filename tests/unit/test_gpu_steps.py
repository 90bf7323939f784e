"""GPU figures per load step (issue 22): journal scrapes (``ServerSnapshot.to_dict()``) of real
DCGM captures and of the simulator's DCGM page, summarised over each step's time, and the GPU
rules said on the step where they apply."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.gpu_steps import GpuTimeline, step_lines
from infmon.model.server.snapshot import EngineSnapshot, ServerSnapshot
from infmon.report.gpu import attach, html_parts, markdown_lines, rows
from infmon.report.markdown import _table
from infmon.sources.exposition import parse_exposition
from infmon.sources.gpu import dcgm_gpus
from tests.unit.test_gpu_rules import sim_page

METRICS = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
ORIGIN = 1000.0


def gpus_of_page(page: str) -> tuple[GpuSnapshot, ...]:
    return tuple(dcgm_gpus(parse_exposition(page)))


def scrape(t_s: float, gpus: tuple[GpuSnapshot, ...], **kw: Any) -> dict[str, Any]:
    """A journal scrape line: session time ``t_s``, the snapshot as the journal keeps it."""
    snap = ServerSnapshot(timestamp_s=ORIGIN + t_s, gpus=gpus, gpu_source="dcgm", **kw)
    return {"t": ORIGIN + t_s, "snap": snap.to_dict()}


def timeline(*lines: dict[str, Any]) -> GpuTimeline:
    tl = GpuTimeline(ORIGIN)
    for line in lines:
        tl.add_scrape(line)
    return tl


def test_mig_instances_per_step_as_the_page_says() -> None:
    gpus = gpus_of_page((METRICS / "dcgm-exporter-issue317-a30-mig.prom").read_text())
    tl = timeline(*(scrape(t, gpus) for t in (1.0, 2.0, 3.0, 9.0)))
    figures = {g.row.label: g for g in tl.step(0.5, 3.5)}
    power = {"0/3": 52.636, "0/4": 52.636, "0/5": 52.746, "0/6": 52.746}
    power |= {"1/3": 56.121, "1/4": 56.127}
    assert sorted(figures) == sorted(f"GPU {k} (1g.6gb)" for k in power)
    for idx, watts in power.items():
        g = figures[f"GPU {idx} (1g.6gb)"]
        d = g.to_dict()
        assert g.scrapes == 3  # the scrape at 9 s is another step's
        assert d["power_w_mean"] == round(watts, 1)
        assert d["mem_used_gib_max"] == round(3.0 / 1024, 3)
        assert d["mem_total_gib"] == round(6015.0 / 1024, 3)
        assert d["serving"]  # no holders on the page: one host, its GPUs serve
    assert figures["GPU 0/3 (1g.6gb)"].to_dict()["activity_mean"] == 0.0
    assert figures["GPU 1/4 (1g.6gb)"].to_dict()["activity_mean"] is None  # not on the page


def test_contention_named_on_the_step_where_the_neighbour_appeared() -> None:
    quiet = gpus_of_page(sim_page("baseline", 64))
    shared = gpus_of_page(sim_page("contention", 64))
    assert quiet[0].key == shared[0].key  # the same virtual GPU, with and without a neighbour
    tl = timeline(*(scrape(t, quiet) for t in (1, 2, 3)), *(scrape(t, shared) for t in (11, 12)))
    first, second = tl.step(0.0, 10.0), tl.step(10.0, 20.0)
    assert step_lines(first) == []
    assert step_lines(second) == [
        "GPU contention: another pod on GPU 0 (noisy-neighbour-0: 3.1 GiB, SM 37%)"
    ]
    (g,) = second
    assert [h["name"] for h in g.to_dict()["others"]] == ["noisy-neighbour-0"]
    assert g.to_dict()["others"][0]["sm_percent_mean"] == 37.0


def test_baseline_at_saturation_names_no_contention() -> None:
    busy = gpus_of_page(sim_page("baseline", 400))
    tl = timeline(*(scrape(t, busy) for t in range(1, 6)))
    (g,) = tl.step(0.0, 10.0)
    assert g.row.activity > 0.9 and g.row.others == ()
    assert step_lines(tl.step(0.0, 10.0), waiting_max=144.0) == []


def test_throttle_said_with_the_clock_drop() -> None:
    (gpu,) = gpus_of_page(sim_page("baseline", 64))
    assert gpu.sm_clock_mhz == 2505.0
    hot = replace(
        gpu, sm_clock_mhz=2100.0, sm_clock_max_mhz=2505.0, throttle_reasons=("power cap",)
    )
    tl = timeline(scrape(1, (gpu,)), scrape(2, (hot,)), scrape(3, (hot,)))
    (g,) = tl.step(0.0, 5.0)
    assert g.to_dict()["sm_clock_mhz_min"] == 2100.0 and g.to_dict()["throttle"] == ["power cap"]
    assert step_lines(tl.step(0.0, 5.0)) == [
        "GPU 0 power-throttled (power cap): SM clock 2,505 → 2,100 MHz (−16%)"
    ]


def test_idle_gpu_while_requests_wait() -> None:
    (gpu,) = gpus_of_page(sim_page("baseline", 64))
    idle = replace(gpu, engine_active=0.12)
    tl = timeline(*(scrape(t, (idle,)) for t in (1, 2, 3)))
    assert step_lines(tl.step(0.0, 5.0)) == []  # nobody waits, latency flat: just a light load
    line = step_lines(tl.step(0.0, 5.0), ttft_p90_ms=900.0, lowest_earlier_ttft_p90_ms=80.0)
    assert line == [
        "GPU idle while requests wait: the bottleneck is before the GPU (CPU, tokenizer, API "
        "server): GPU 12% busy on average (at most 12%), TTFT p90 80 ms → 900 ms"
    ]


def test_joined_pod_is_the_server_and_other_pods_are_others() -> None:
    """Through Prometheus the fleet view names which pod serves: the other one is contention."""
    shared = gpus_of_page(sim_page("contention", 64))
    engine = EngineSnapshot(labels=(("pod", "infmon-sim-0"),), gpus=("0",))
    tl = timeline(scrape(1, shared, engines=(engine,)), scrape(2, shared, engines=(engine,)))
    (g,) = tl.step(0.0, 5.0)
    assert [h.name for h in g.row.holders if h.serving] == ["infmon-sim-0"]
    assert [h.name for h in g.row.others] == ["noisy-neighbour-0"]


def test_report_document_and_markdown_have_the_gpu_per_step() -> None:
    quiet = gpus_of_page(sim_page("baseline", 64))
    shared = gpus_of_page(sim_page("contention", 64))
    tl = timeline(*(scrape(t, quiet) for t in (1, 2)), *(scrape(t, shared) for t in (11, 12)))
    steps: list[Any] = [
        {"step": 1, "concurrency": 8, "start_s": 0.0, "end_s": 10.0, "ttft_ms": {"p90": 80}},
        {"step": 2, "concurrency": 8, "start_s": 10.0, "end_s": 20.0, "ttft_ms": {"p90": 85}},
    ]
    lines, section = attach(steps, tl)
    doc: dict[str, Any] = {"steps": steps, **section}
    assert [len(s["gpu"]) for s in doc["steps"]] == [1, 1]
    assert lines == [
        "c=8: GPU contention: another pod on GPU 0 (noisy-neighbour-0: 3.1 GiB, SM 37%)"
    ]
    assert len(doc["gpu"]["timeline"]) == 4 and doc["gpu"]["gpus"][0]["serving"]
    table = rows(doc)
    assert [r[0] for r in table] == ["c=8", "c=8"]
    assert table[0][-1] == "—" and table[1][-1] == "noisy-neighbour-0 (3.1 GiB, SM 37%)"
    md = "\n".join(markdown_lines(doc, _table))
    assert md.startswith("## GPU") and "noisy-neighbour-0 (3.1 GiB, SM 37%)" in md


def test_no_gpu_data_no_section() -> None:
    steps: list[Any] = [{"start_s": 0.0, "end_s": 1.0}]
    lines, section = attach(steps, timeline(scrape(0.5, ())))
    assert section == {} and "gpu" not in steps[0] and lines == []
    assert markdown_lines({"steps": steps}, _table) == []


def test_html_has_the_gpu_table_and_charts_per_step() -> None:
    from infmon.report.html import _table as html_table

    shared = gpus_of_page(sim_page("contention", 64))
    tl = timeline(*(scrape(t, shared) for t in (1, 2, 11, 12)))
    steps: list[Any] = [
        {"step": 1, "concurrency": 1, "start_s": 0.0, "end_s": 10.0},
        {"step": 2, "concurrency": 8, "start_s": 10.0, "end_s": 20.0},
    ]
    _, section = attach(steps, tl)
    doc: dict[str, Any] = {"steps": steps, **section}
    html = "\n".join(html_parts(doc, html_table))
    assert html.startswith('<h2>GPU</h2>\n<div class="wide"><table>') and html.count("<svg") == 3
    text = re.sub(r"</?span>", "", html)  # a cell of several figures wraps between them
    assert "noisy-neighbour-0 (3.1 GiB, SM 37%)" in text and "concurrency (log2)" in html
    assert ">c=8<" in html  # the steps marked on the time charts
