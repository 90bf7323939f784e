"""Every captured page parses; backend, version and canonical values match the file itself.

Expected values are read independently of the parser: by matching the raw text lines.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import ExpositionError, parse_exposition
from tests.conftest import FIXTURES

METRICS = FIXTURES / "metrics"
PAGES = sorted(METRICS.glob("*.prom"))

EXPECTED_BACKEND = {
    "dcgm-exporter-issue250-v100-hostname.prom": ("dcgm", "dcgm-exporter"),
    "dcgm-exporter-issue317-a30-mig.prom": ("dcgm", "dcgm-exporter"),
    "dcgm-exporter-issue512-h100-mig-k8s.prom": ("dcgm", "dcgm-exporter"),
    "dcgm-exporter-issue512-h100-redacted-uuid.prom": ("dcgm", "dcgm-exporter"),
    "dcgm-exporter-pr736-mixed-models.prom": ("dcgm", "dcgm-exporter"),
    "llamacpp-pr13196-sample.prom": ("llamacpp", "mid-2025 or newer"),
    "sglang-docs-llama31-8b.prom": ("sglang", "≤0.4.4 (early 2025 names)"),
    "tgi-compat-ibm-vllm-tgis-pr18.prom": ("tgi", "tgi_-compatible exporter"),
    "vllm-v0-lora-multimodel-pr11117.prom": ("vllm-v0", "V0 engine (≤0.11)"),
    "vllm-v0-opt125m-issue8819-ttft-a.prom": ("vllm-v0", "V0 engine (≤0.11)"),
    "vllm-v1-0.10.0-glm45-ps617-part1.prom": ("vllm-v1", "0.9.2–0.11"),
    "vllm-v1-0.10.0-glm45-ps617-part2.prom": ("vllm-v1", "≥0.8.3"),
    "vllm-v1-0.32-cpu-tiny-gpt2.prom": ("vllm-v1", "≥0.20"),
    "vllm-v1-0.32-cpu-perreq.prom": ("vllm-v1", "≥0.20"),
    "vllm-v1-0.32-cpu-perreq-spec.prom": ("vllm-v1", "≥0.20"),
    "vllm-v1-dp2-multiengine-qwen3-8b-pr22227-part1.prom": ("vllm-v1", "≥0.8.3"),
}


def grep_sum(path: Path, name: str) -> float | None:
    """Sum of the values of every line whose metric name is exactly ``name``."""
    pat = re.compile(rf"^{re.escape(name)}(?:\{{[^}}]*\}})?\s+(\S+)")
    vals = [float(m.group(1)) for line in path.read_text().splitlines() if (m := pat.match(line))]
    return sum(vals) if vals else None


def test_every_fixture_is_covered() -> None:
    assert {p.name for p in PAGES} == set(EXPECTED_BACKEND)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_fixture_parses_and_backend_detected(path: Path) -> None:
    page = parse_exposition(path.read_bytes())
    value_lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    created = [ln for ln in value_lines if ln.split("{")[0].split()[0].endswith("_created")]
    assert len(page) == len(value_lines) - len(created)
    snap = snapshot_of_page(page)
    assert (snap.backend, snap.backend_version) == EXPECTED_BACKEND[path.name]


CANONICAL = {
    "running": {
        "vllm": "vllm:num_requests_running",
        "sglang": "sglang:num_running_reqs",
        "tgi": "tgi_batch_current_size",
        "llamacpp": "llamacpp:requests_processing",
    },
    "waiting": {
        "vllm": "vllm:num_requests_waiting",
        "sglang": "sglang:num_queue_reqs",
        "tgi": "tgi_queue_size",
        "llamacpp": "llamacpp:requests_deferred",
    },
    "kv_cache_usage": {"vllm": "vllm:kv_cache_usage_perc", "sglang": "sglang:token_usage"},
    "prompt_tokens_total": {
        "vllm": "vllm:prompt_tokens_total",
        "sglang": "sglang:prompt_tokens_total",
        "llamacpp": "llamacpp:prompt_tokens_total",
    },
    "generation_tokens_total": {
        "vllm": "vllm:generation_tokens_total",
        "sglang": "sglang:generation_tokens_total",
        "llamacpp": "llamacpp:tokens_predicted_total",
    },
    "preemptions_total": {"vllm": "vllm:num_preemptions_total"},
    "prefix_cache_queries_total": {"vllm": "vllm:prefix_cache_queries_total"},
    "prefix_cache_hits_total": {"vllm": "vllm:prefix_cache_hits_total"},
}


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_canonical_values_equal_the_file(path: Path) -> None:
    snap = snapshot_of_page(parse_exposition(path.read_text()))
    family = (snap.backend or "").split("-")[0]
    for key, names in CANONICAL.items():
        name = names.get(family)
        expected = grep_sum(path, name) if name else None
        if key == "prefix_cache_hits_total" and expected is None and family == "vllm":
            expected = grep_sum(path, "vllm:gpu_prefix_cache_hits_total")
        assert getattr(snap, key) == expected, key


def test_vllm_032_page_in_detail() -> None:
    path = METRICS / "vllm-v1-0.32-cpu-tiny-gpt2.prom"
    text = path.read_text()
    snap = snapshot_of_page(parse_exposition(text))
    assert snap.models == ("tiny-gpt2",)
    assert snap.cache_config["block_size"] == re.search(r'[{,]block_size="(\d+)"', text)[1]
    blocks = int(re.search(r'num_gpu_blocks="(\d+)"', text)[1])
    assert snap.kv_capacity_tokens == blocks * int(snap.cache_config["block_size"])
    assert snap.kv_capacity_tokens == int(re.search(r'kv_cache_size_tokens="(\d+)"', text)[1])
    assert snap.requests_finished_total["length"] == float(
        re.search(r'request_success_total\{[^}]*finished_reason="length"[^}]*\} (\S+)', text)[1]
    )
    ttft = snap.latency_s["ttft"]
    assert ttft.count == grep_sum(path, "vllm:time_to_first_token_seconds_count")
    assert ttft.mean == pytest.approx(
        grep_sum(path, "vllm:time_to_first_token_seconds_sum") / ttft.count
    )
    assert snap.spec_decode is None
    assert snap.prefix_cache_hit_rate == 0.0  # 0 hits of 11 queried tokens since start
    assert [e.key for e in snap.engines] == ["model_name=tiny-gpt2,engine=0"]


def test_sglang_gauges_and_histogram_mean() -> None:
    path = METRICS / "sglang-docs-llama31-8b.prom"
    snap = snapshot_of_page(parse_exposition(path.read_text()))
    assert snap.prefix_cache_hit_rate == grep_sum(path, "sglang:cache_hit_rate")
    e2e = snap.latency_s["e2e"]
    assert e2e.mean == pytest.approx(
        grep_sum(path, "sglang:e2e_request_latency_seconds_sum")
        / grep_sum(path, "sglang:e2e_request_latency_seconds_count")
    )


def test_dcgm_page_gives_gpus_not_server_values() -> None:
    snap = snapshot_of_page(
        parse_exposition((METRICS / "dcgm-exporter-issue512-h100-mig-k8s.prom").read_text())
    )
    assert len(snap.gpus) == 3 and snap.running is None
    assert {g.name for g in snap.gpus} == {"NVIDIA H100 80GB HBM3"}
    assert all(g.engine_active == 0.0 and g.mem_used_mib is None for g in snap.gpus)


def test_promql_table_is_not_exposition() -> None:
    bad = METRICS / "vllm-v1-specdecode-dp8-pr24049-promql-table-part1.txt"
    with pytest.raises(ExpositionError):
        parse_exposition(bad.read_text())
