"""`infmon scrape` of a real vLLM page, and metric parity between real vLLM and `infmon sim`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import running_sim
from tests.real.harness import (
    CONCEPT_FAMILIES,
    Family,
    complete,
    explain,
    families,
    get_text,
    infmon,
    rs,
    sample_labels,
    sample_sum,
)

pytestmark = pytest.mark.real_server

# scrape --json key -> the sample on the page that holds it
SCALARS = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_cache_usage": "vllm:kv_cache_usage_perc",
    "preemptions_total": "vllm:num_preemptions_total",
    "prompt_tokens_total": "vllm:prompt_tokens_total",
    "generation_tokens_total": "vllm:generation_tokens_total",
}


def _idle_page(url: str) -> str:
    """A page that no request is changing (two equal reads of the concept samples)."""
    for _ in range(20):
        a = get_text(url + "/metrics")
        b = get_text(url + "/metrics")
        if all(sample_sum(a, s) == sample_sum(b, s) for s in SCALARS.values()):
            return b
    raise AssertionError("vLLM's page kept changing with no load")


def test_scrape_maps_every_concept_on_the_page(vllm: rs.Server, tmp_path: Path) -> None:
    for i in range(3):
        complete(vllm.url, f"def function_{i}(x):", max_tokens=8)
    page = _idle_page(vllm.url)
    proc = infmon("scrape", vllm.url, "--json", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(proc.stdout)

    assert data["backend"].lower().startswith("vllm"), data["backend"]
    assert rs.MODEL_NAME in json.dumps(data["models"])
    for key, sample in SCALARS.items():
        assert data[key] == pytest.approx(sample_sum(page, sample)), (key, data[key])
    assert data["generation_tokens_total"] > 0

    hits = sample_sum(page, "vllm:prefix_cache_hits_total")
    queries = sample_sum(page, "vllm:prefix_cache_queries_total")
    rate = data["prefix_cache_hit_rate"]
    assert rate is None or rate == pytest.approx(hits / queries), (rate, hits, queries)

    (config,) = sample_labels(page, "vllm:cache_config_info")
    block_size, blocks = int(config["block_size"]), int(config["num_gpu_blocks"])
    got = {k: str(v) for k, v in data["cache_config"].items()}
    assert got.get("block_size") == str(block_size) and got.get("num_gpu_blocks") == str(blocks), (
        got
    )
    assert data["kv_capacity_tokens"] == block_size * blocks
    assert data["spec_decode"] is None  # no spec decoding on this server


def parity_problems(real: dict[str, Family], sim: dict[str, Family], names) -> list[str]:
    """Every way SIM's families differ from REAL's, one line per family, naming it."""
    problems = []
    for name in names:
        want, got = real[name], sim.get(name)
        if got is None:
            problems.append(f"{name}: missing from infmon sim")
            continue
        if got.type != want.type:
            problems.append(f"{name}: type {got.type!r} in sim, {want.type!r} in vLLM")
        if got.label_names != want.label_names:
            problems.append(
                f"{name}: labels missing in sim {sorted(want.label_names - got.label_names)}, "
                f"extra in sim {sorted(got.label_names - want.label_names)}"
            )
        if got.buckets != want.buckets:
            problems.append(f"{name}: buckets {got.buckets} in sim, {want.buckets} in vLLM")
    return problems


def check_parity(real_page: str, sim_page: str, names) -> None:
    real, sim = families(real_page), families(sim_page)
    absent = [n for n in names if n not in real]
    assert not absent, f"real vLLM does not expose {absent}: update CONCEPT_FAMILIES"
    problems = parity_problems(real, sim, names)
    assert not problems, "metric parity with vLLM 0.32:\n" + "\n".join(problems)


def test_metric_parity_with_sim(vllm: rs.Server) -> None:
    real_page = get_text(vllm.url + "/metrics")
    with running_sim("--scenario", "baseline", "--seed", "1") as sim_url:
        sim_page = get_text(sim_url + "/metrics")
    check_parity(real_page, sim_page, CONCEPT_FAMILIES)


def _process_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads, not its children), from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_api_server_cpu_is_the_serving_processs_own(vllm: rs.Server, tmp_path: Path) -> None:
    """``api_server_cpu_s_total`` is the CPU time of the process that answered ``/metrics``:
    vLLM's API server, the ``vllm serve`` process itself (its engine core is a child, whose
    CPU is not in it). Read between two readings of that process's own counters in ``/proc``,
    with two scrapes' worth of its work between them."""
    for i in range(3):
        complete(vllm.url, f"def api_{i}(x):", max_tokens=16)
    before = _process_cpu_s(vllm.pid)
    proc = infmon("scrape", vllm.url, "--json", "--interval", "1", cwd=tmp_path)  # two pages
    after = _process_cpu_s(vllm.pid)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(proc.stdout)
    got = data["api_server_cpu_s_total"]
    print(f"\nAPI server CPU: /proc {before:.2f}-{after:.2f} s, scraped {got:.2f} s, "
          f"{data['api_server_cpu_cores']} cores over the window")  # fmt: skip
    assert before - 0.02 <= got <= after + 0.02
    cores = data["api_server_cpu_cores"]
    assert cores is not None and 0.0 <= cores < (os.cpu_count() or 1)
