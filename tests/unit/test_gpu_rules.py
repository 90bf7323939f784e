"""GPU diagnosis: the rules read GPU rows built from real DCGM pages (the fixtures) and from the
simulator's own DCGM page, its engine run in virtual time (issue 22)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from infmon.model.live.dashboard import ServerView
from infmon.model.live.diagnose import DiagnosisInputs, diagnose
from infmon.model.server.gpu_state import GpuEvidence, GpuState, build_rows
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sim.dcgm import DcgmSeries, Neighbour
from infmon.sim.engine import Engine, Sequence
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sources.exposition import parse_exposition
from infmon.sources.gpu import dcgm_gpus

METRICS = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"
NAN = math.nan


def sim_page(scenario: str, streams: int, seconds: float = 3.0) -> str:
    """The simulator's DCGM page after ``seconds`` of ``streams`` requests in virtual time."""
    cfg = build_config(SCENARIOS[scenario], max_model_len=4096)
    engine = Engine(cfg)
    dcgm = DcgmSeries(cfg, engine.budget, neighbour=Neighbour.for_contention(cfg.contention))
    for i in range(streams):
        engine.add(Sequence(f"r{i}", 256, 1000, None, 0.0))
    t = 0.0
    while t < seconds:
        out = engine.step(t)
        dcgm.on_step(out)
        t = out.end_s if out.end_s > t else t + 0.001
    return dcgm.render(t).decode()


def inputs(gpu: GpuEvidence | None, **kw: object) -> DiagnosisInputs:
    base = DiagnosisInputs(
        server=ServerView(has_data=True, running=16, waiting=0, kv_usage_fraction=0.3),
        client_output_tokens_per_s=500.0,
        recent_client_series=(500.0,) * 30,
        step_age_s=30.0,
        load_mode="closed",
        load_level=16,
        inflight_requests=16,
        paused=False,
        gpu=gpu,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def evidence_of(page: str, t0: float = 0.0, scrapes: int = 6) -> GpuEvidence:
    state = GpuState()
    snap = ServerSnapshot(timestamp_s=t0, gpus=dcgm_gpus(parse_exposition(page)))
    for k in range(scrapes):
        state.add(replace(snap, timestamp_s=t0 + k), t0 + k)
    ev = state.evidence()
    assert ev is not None
    return ev


def test_contention_scenario_names_the_other_pod() -> None:
    ev = evidence_of(sim_page("contention", 64))
    (row,) = ev.rows
    assert row.serving and [h.name for h in row.others] == ["noisy-neighbour-0"]
    lines = [d.text for d in diagnose(inputs(ev))]
    hit = [x for x in lines if x.startswith("GPU contention")]
    # the neighbour's share of SM time: 0.6 / 1.6, an integer percentage as the exporter prints
    assert hit == ["GPU contention: another pod on GPU 0 (noisy-neighbour-0: 3.1 GiB, SM 37%)"]


def test_baseline_at_saturation_names_no_contention() -> None:
    page = sim_page("baseline", 400)  # more than max_num_seqs: requests wait
    ev = evidence_of(page)
    (row,) = ev.rows
    assert row.activity > 0.9 and row.others == ()
    server = ServerView(has_data=True, running=256, waiting=144, kv_usage_fraction=0.4)
    found = diagnose(inputs(ev, server=server, client_output_tokens_per_s=300.0))
    assert not [d for d in found if d.key.startswith("gpu_")], found
    assert not [d for d in found if "contention" in d.text]


def test_throughput_drop_with_a_busy_gpu_is_contention_not_a_question() -> None:
    ev = evidence_of(sim_page("baseline", 64))
    server = ServerView(
        has_data=True, running=16, waiting=0, kv_usage_fraction=0.3, generation_tokens_per_s=300
    )
    fell = inputs(  # 40% under the step's peak, on the server's own counter too
        ev, client_output_tokens_per_s=300.0, server=server, recent_server_series=(500.0,) * 30
    )
    texts = [d.text for d in diagnose(fell)]
    assert any(
        t.startswith("GPU contention: throughput fell 40% at constant load while GPU 0 stayed busy")
        for t in texts
    ), texts
    assert not any("contention?" in t for t in texts)
    no_gpu = [d.text for d in diagnose(replace(fell, gpu=None))]
    assert "throughput fell 40% at constant load: contention?" in no_gpu


def test_idle_gpu_while_latency_climbs_on_a_real_a30_page() -> None:
    ev = evidence_of((METRICS / "dcgm-exporter-issue317-a30-mig.prom").read_text())
    assert len(ev.serving) == 6 and ev.busiest_activity == 0.0
    ttft = (0.05,) * 10 + (0.08, 0.12, 0.2, 0.3, 0.4)
    (idle,) = [d for d in diagnose(inputs(ev, ttft_p90_series=ttft)) if d.key == "gpu_idle"]
    assert idle.text.startswith(
        "GPU idle while requests wait: the bottleneck is before the GPU (CPU, tokenizer, API server)"
    )
    assert "GPU at most 0% busy, TTFT p90 50 ms → 400 ms" in idle.text
    flat = diagnose(inputs(ev, ttft_p90_series=(0.05,) * 15))
    assert not [d for d in flat if d.key == "gpu_idle"]  # idle but nothing waits: fine


def test_no_activity_published_means_no_idle_verdict() -> None:
    ev = evidence_of((METRICS / "dcgm-exporter-pr736-mixed-models.prom").read_text())
    assert math.isnan(ev.busiest_activity)
    found = diagnose(inputs(ev, ttft_p90_series=(0.05,) * 10 + (0.5,) * 5))
    assert not [d for d in found if d.key.startswith("gpu_")]


def test_the_pod_of_a_real_h100_mig_page_is_the_server_on_its_instance() -> None:
    page = (METRICS / "dcgm-exporter-issue512-h100-mig-k8s.prom").read_text()
    rows = build_rows(dcgm_gpus(parse_exposition(page)))
    by = {r.label: r for r in rows}
    assert by["GPU 0/7 (1g.10gb)"].serving and by["GPU 0/9 (1g.10gb)"].serving
    assert not by["GPU 0/8 (1g.10gb)"].serving  # nobody holds it
    assert all(r.others == () for r in rows)


THROTTLED = (
    'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-x",Hostname="h"} 1410\n'
    'DCGM_FI_DEV_MAX_SM_CLOCK{gpu="0",UUID="GPU-x",Hostname="h"} 1980\n'
    'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-x",Hostname="h"} 699.5\n'
    'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0",UUID="GPU-x",Hostname="h"} 700\n'
    'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0",UUID="GPU-x",Hostname="h"} %d\n'
)


def test_power_throttling_is_said_with_the_clock_drop() -> None:
    ev = evidence_of(THROTTLED % 0x4)
    (d,) = [d for d in diagnose(inputs(ev)) if d.key == "gpu_throttle"]
    assert d.text == "GPU 0 power-throttled (power cap): SM clock 1,980 → 1,410 MHz (−29%)"
    thermal = [d.text for d in diagnose(inputs(evidence_of(THROTTLED % 0x40)))]
    assert "GPU 0 thermal-throttled (thermal (hw)): SM clock 1,980 → 1,410 MHz (−29%)" in thermal
    idle = diagnose(inputs(evidence_of(THROTTLED % 0x1)))  # "GPU idle" is not throttling
    assert [d.text for d in idle if d.key == "gpu_throttle"] == [
        "GPU 0 at its power limit (700/700 W): SM clock 1,980 → 1,410 MHz (−29%)"
    ]


def test_violation_counters_growing_mean_throttling_without_reasons() -> None:
    ids = 'gpu="0",UUID="GPU-x",Hostname="h"'
    state = GpuState()
    for k, us in enumerate((0, 400_000, 900_000)):  # 40-50% of each second throttled
        page = (
            f"DCGM_FI_DEV_SM_CLOCK{{{ids}}} {2505 - 300 * k}\n"
            f"DCGM_FI_DEV_THERMAL_VIOLATION{{{ids}}} {us}\n"
        )
        state.add(ServerSnapshot(float(k), gpus=dcgm_gpus(parse_exposition(page))), float(k))
    (d,) = [d for d in diagnose(inputs(state.evidence())) if d.key == "gpu_throttle"]
    assert (
        d.text == "GPU 0 thermal-throttled (thermal violation): SM clock 2,505 → 1,905 MHz (−24%)"
    )


def test_a_drop_the_servers_counter_did_not_see_is_no_gpu_contention() -> None:
    """Issue 26 finding 15: on spec-pitfall, with no neighbour, the host's CPU starved the
    simulator's delivery; the client's throughput fell, the server's generation held, and the
    rule said "GPU contention: throughput fell 50% at constant load"."""
    ev = evidence_of(sim_page("baseline", 64))
    server = ServerView(
        has_data=True, running=16, waiting=0, kv_usage_fraction=0.3, generation_tokens_per_s=500
    )
    held = inputs(
        ev, client_output_tokens_per_s=250.0, server=server, recent_server_series=(500.0,) * 30
    )
    texts = [d.text for d in diagnose(held)]
    assert not any("contention" in t.lower() for t in texts), texts
    assert (
        "throughput fell 50% at constant load while the server's generation held: the client "
        "side fell behind (its host's CPU, or the network)" in texts
    )
    # without the server's counter a busy GPU is still no proof: a question, not a verdict
    unknown = [
        d.text
        for d in diagnose(
            replace(
                held,
                server=replace(server, generation_tokens_per_s=math.nan),
                recent_server_series=(),
            )
        )
    ]
    assert not any(t.startswith("GPU contention") for t in unknown), unknown
