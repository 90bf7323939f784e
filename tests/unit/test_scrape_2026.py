"""The 2025–26 vLLM families in ``infmon scrape --json``: the page's values, null when absent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from infmon.cli import main
from infmon.model.server.families import DETAIL_KEYS
from infmon.sources.canonical import snapshot_from, snapshot_of_page
from infmon.sources.exposition import parse_exposition
from infmon.sources.readings import read_page
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "metrics"
CAPTURES = ("vllm-v1-0.32-cpu-perreq.prom", "vllm-v1-0.32-cpu-perreq-spec.prom")
OLD = FIXTURES / "vllm-v1-0.10.0-glm45-ps617-part1.prom"


def _by_label(text: str, sample: str, label: str) -> dict[str, float]:
    """Summed per label value, read with prometheus_client's own parser (the reference)."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == sample:
                key = s.labels[label]
                out[key] = out.get(key, 0.0) + s.value
    return out


def _scrape(capsys: pytest.CaptureFixture[str], *pages: Path) -> dict[str, object]:
    assert main(["scrape", "--json", *map(str, pages)]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.mark.parametrize("name", CAPTURES)
def test_each_real_capture_lists_the_new_keys_with_the_pages_values(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    page = FIXTURES / name
    text = page.read_text()
    got = _scrape(capsys, page)
    for key in DETAIL_KEYS:
        assert key in got
    pairs = {
        "waiting_by_reason": ("vllm:num_requests_waiting_by_reason", "reason"),
        "prompt_tokens_by_source_total": ("vllm:prompt_tokens_by_source_total", "source"),
        "prompt_tokens_cached_by_source_total": (
            "vllm:prompt_tokens_cached_by_source_total",
            "source",
        ),
        "admission_rejections_total": ("vllm:admission_rejections_total", "reason"),
    }
    for key, (sample, label) in pairs.items():
        want = _by_label(text, sample, label)
        assert want, (key, "the capture has the family")
        assert got[key] == want, key
    assert got["prompt_tokens_cached_total"] == sum(
        _by_label(text, "vllm:prompt_tokens_cached_total", "model_name").values()
    )
    states = _by_label(text, "vllm:engine_sleep_state", "sleep_state")
    assert got["engine_sleep_state"] == next(k for k, v in states.items() if v == 1.0) == "awake"
    est = got["estimates"]
    assert isinstance(est, dict)
    assert est["flops_total"] == sum(
        _by_label(text, "vllm:estimated_flops_per_gpu_total", "model_name").values()
    )
    # this CPU build runs no KV connector and no LoRA: unknown, never 0
    assert got["kv_offload"] is None and got["pd_transfer"] is None and got["lora"] is None


def test_a_page_from_before_them_says_null_never_zero(capsys: pytest.CaptureFixture[str]) -> None:
    got = _scrape(capsys, OLD)
    assert all(got[key] is None for key in DETAIL_KEYS)
    assert main(["scrape", str(OLD)]) == 0
    assert "waiting capacity" not in capsys.readouterr().out


def test_the_text_view_has_them_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scrape", str(FIXTURES / CAPTURES[1])]) == 0
    out = capsys.readouterr().out
    assert (
        "waiting capacity 0, deferred 0 · prompt from cache 0% · rejected 0 · engine awake" in out
    )


# KV offload, NIXL and LoRA as the installed vLLM 0.32 source declares them (no real page with a
# KV connector or LoRA here: the values are made up, the names, labels and types are vLLM's).
CONNECTOR_PAGE = """\
# TYPE vllm:kv_offload_load_bytes counter
vllm:kv_offload_load_bytes_total{{engine="0",model_name="m"}} {load}
# TYPE vllm:kv_offload_load_time counter
vllm:kv_offload_load_time_total{{engine="0",model_name="m"}} {load_t}
# TYPE vllm:kv_offload_store_bytes counter
vllm:kv_offload_store_bytes_total{{engine="0",model_name="m"}} {store}
# TYPE vllm:kv_offload_store_time counter
vllm:kv_offload_store_time_total{{engine="0",model_name="m"}} 1.0
# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{{engine="0",model_name="m",le="0.01"}} {fast}
vllm:nixl_xfer_time_seconds_bucket{{engine="0",model_name="m",le="+Inf"}} {n}
vllm:nixl_xfer_time_seconds_sum{{engine="0",model_name="m"}} {xsum}
vllm:nixl_xfer_time_seconds_count{{engine="0",model_name="m"}} {n}
# TYPE vllm:nixl_num_failed_transfers counter
vllm:nixl_num_failed_transfers_total{{engine="0",model_name="m"}} 2
# TYPE vllm:prompt_tokens_by_source counter
vllm:prompt_tokens_by_source_total{{engine="0",model_name="m",source="local_compute"}} {compute}
vllm:prompt_tokens_by_source_total{{engine="0",model_name="m",source="local_cache_hit"}} {hit}
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{{max_lora="4",running_lora_adapters="sql,chat",waiting_lora_adapters=""}} 1.7e9
"""


def _page(**kw: float) -> str:
    return CONNECTOR_PAGE.format(**kw)


def test_kv_offload_pd_transfer_and_lora_over_a_window() -> None:
    a = _page(load=0, load_t=0, store=0, fast=0, n=0, xsum=0, compute=0, hit=0)
    b = _page(load=12e9, load_t=1.8, store=3e9, fast=9, n=10, xsum=0.2, compute=800, hit=200)
    ra, rb = (read_page(parse_exposition(p)) for p in (a, b))
    snap = snapshot_from(rb, ra, timestamp_s=10.0, window_s=10.0)
    off = snap.detail.kv_offload
    assert off is not None
    assert off.load_bytes_per_s == pytest.approx(1.2e9)
    assert off.load_time_fraction == pytest.approx(0.18)
    pd = snap.detail.pd_transfer
    assert pd is not None and pd.transfers == 10 and pd.failed_total == 2
    assert pd.xfer_time_mean_s == pytest.approx(0.02)
    assert snap.detail.source_share("local_cache_hit") == pytest.approx(0.2)
    lora = snap.detail.lora
    assert lora is not None and lora.max_lora == 4 and lora.running == ("sql", "chat")
    assert lora.waiting == ()


def test_hostile_label_values_are_bounded_and_escaped() -> None:
    lines = [
        f'vllm:num_requests_waiting_by_reason{{engine="0",reason="r{i}\x1b[2J"}} {i}'
        for i in range(500)
    ]
    lines.append('vllm:num_requests_waiting_by_reason{engine="0",reason="capacity"} -4')
    snap = snapshot_of_page(parse_exposition("\n".join(lines) + "\nvllm:num_requests_running 1\n"))
    reasons = snap.detail.waiting_by_reason
    assert len(reasons) == 32 and "capacity" not in reasons
    assert all("\x1b" not in k and k.endswith("\\x1b[2J") for k in reasons)
