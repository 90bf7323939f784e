"""`infmon scrape --prometheus` through a REAL Prometheus equals a direct scrape of the target."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import FIXTURES, REPO, infmon_cmd, running_sim
from tests.e2e.conftest import PromTarget, external_prometheus, prometheus_for, serving_page

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]

PAGE = FIXTURES / "metrics/vllm-v1-0.32-cpu-tiny-gpt2.prom"
SAME = (
    "backend",
    "running",
    "waiting",
    "kv_cache_usage",
    "prefix_cache_hit_rate",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
    "preemptions_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "requests_finished_total",
    "cache_config",
    "kv_capacity_tokens",
    "kv_block_size_tokens",
    "spec_decode",
)


def scrape_json(*args: str) -> dict:
    out = subprocess.run(
        infmon_cmd("scrape", "--json", *args), capture_output=True, text=True, timeout=60, cwd=REPO
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_same_numbers(direct: dict, via_prom: dict) -> None:
    for key in SAME:
        assert via_prom[key] == direct[key], key
    assert set(direct["models"]) >= set(via_prom["models"]) and via_prom["models"]
    assert set(via_prom["latency_s"]) == set(direct["latency_s"])
    for name, stat in direct["latency_s"].items():
        for field, value in stat.items():
            got = via_prom["latency_s"][name][field]
            assert got == pytest.approx(value, rel=1e-9), (name, field)


@pytest.fixture(scope="module")
def fixture_page_behind_prometheus() -> Iterator[PromTarget]:
    """The real vLLM 0.32 page, served over HTTP and scraped by a real Prometheus."""
    with serving_page(PAGE.read_bytes()) as target, prometheus_for(target) as prom:
        yield PromTarget(prom, target, "infmon-e2e")


def test_prometheus_equals_direct_on_a_real_vllm_page(
    fixture_page_behind_prometheus: PromTarget,
) -> None:
    t = fixture_page_behind_prometheus
    direct = scrape_json(t.target_url)
    via_prom = scrape_json("--prometheus", t.prometheus_url, "--selector", f'{{job="{t.job}"}}')
    assert direct["backend"] == "vllm-v1" and direct["prompt_tokens_total"] == 11.0
    assert_same_numbers(direct, via_prom)
    assert [e["labels"]["instance"] for e in via_prom["engines"]] == [
        t.target_url.removeprefix("http://")
    ]


def test_selector_that_matches_nothing_gives_unknowns(
    fixture_page_behind_prometheus: PromTarget,
) -> None:
    t = fixture_page_behind_prometheus
    empty = scrape_json("--prometheus", t.prometheus_url, "--selector", '{job="no-such-job"}')
    assert empty["backend"] is None and empty["running"] is None and empty["engines"] == []


def test_prometheus_equals_direct_on_the_simulator() -> None:
    ext = external_prometheus()
    if ext is not None:
        direct = scrape_json(ext.target_url)
        via_prom = scrape_json(
            "--prometheus", ext.prometheus_url, "--selector", f'{{job="{ext.job}"}}'
        )
        assert_same_numbers(direct, via_prom)
        return
    with running_sim("--scenario", "baseline", "--seed", "1") as sim, prometheus_for(sim) as prom:
        direct = scrape_json(sim)
        via_prom = scrape_json("--prometheus", prom, "--selector", '{job="infmon-e2e"}')
        assert_same_numbers(direct, via_prom)
