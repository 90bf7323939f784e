"""Impossible numbers: usage of 10^400, negative or absurd usage, counters that go negative and
down, NaN/Inf gauges, a server without /metrics. Nothing crashes, nothing impossible is shown,
and every ``--json`` output is valid JSON (unknown = null)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean_run, bench, records, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"invalid JSON constant {name} in output")

    doc = json.loads(text, parse_constant=refuse)
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("mode", ["huge-usage", "absurd-usage"])
def test_impossible_usage_falls_back_to_chunks_flagged(tmp_path: Path, mode: str) -> None:
    """The requests still count (tokens from their chunks, flagged); the usage is rejected
    (``bad_usage``, with why); throughput stays what the chunks say."""
    out = tmp_path / "bench.json"
    with serve(mode) as (url, _):
        ran = bench(url, tmp_path / "s", "--json", str(out), home=tmp_path)
    assert ran.returncode == 0, ran.show()
    assert_clean_run(ran)
    assert "output tokens counted from chunks" in ran.stdout
    recs = [r for r in records(tmp_path / "s") if r.ok]
    measured = [r for r in recs if r.request_id >= 0]
    assert measured and all(r.usage_rejected and r.output_tokens is None for r in measured)
    assert any(
        "outside [0, 10,000,000]" in r.usage_rejected or "max_tokens" in r.usage_rejected
        for r in measured
    )
    step = _strict(out.read_text())["steps"][0]
    assert step["tokens_estimated"] and step["failed"] == 0
    # 8 tokens per request, a few hundred requests/s at most: never 2.2e34 tok/s, never < 0
    assert 0 < step["output_throughput_tok_s"] < 1e5


def test_counters_going_negative_and_down(tmp_path: Path) -> None:
    with serve("counter-down") as (url, _):
        ran = run_infmon("scrape", url, "--interval", "0.3", "--json", home=tmp_path)
        text = run_infmon("scrape", url, "--interval", "0.3", home=tmp_path)
    for r in (ran, text):
        assert r.returncode == 0
        assert_clean_run(r)
    doc = _strict(ran.stdout)
    assert doc["preemptions_total"] is None  # -5 is no counter value
    for key in ("generation_tokens_per_s", "preemptions_per_s", "generation_tokens_total"):
        assert doc[key] is None or doc[key] >= 0, (key, doc[key])
    assert "-5" not in text.stdout


def test_nan_and_infinite_values_print_as_null(tmp_path: Path) -> None:
    with serve("nan-metrics") as (url, _):
        ran = run_infmon("scrape", url, "--json", home=tmp_path)
    assert ran.returncode == 0
    assert_clean_run(ran)
    doc = _strict(ran.stdout)  # bare NaN / Infinity before
    assert doc["kv_cache_usage"] is None and doc["running"] is None
    assert doc["generation_tokens_total"] is None


def test_no_metrics_with_json_prints_json(tmp_path: Path) -> None:
    with serve("no-metrics") as (url, _):
        ran = run_infmon("scrape", url, "--json", home=tmp_path)
        text = run_infmon("scrape", url, home=tmp_path)
    assert ran.returncode == 1 and text.returncode == 1
    assert_clean_run(ran)
    doc = _strict(ran.stdout)
    assert doc["state"] == "no_metrics" and doc["error_kind"] == "no_metrics"
    assert text.stdout.strip() == "no server metrics (the server has no /metrics endpoint)"


def test_a_nul_byte_in_a_page_is_one_clean_parse_error(tmp_path: Path) -> None:
    page = tmp_path / "nul.prom"
    page.write_bytes(b'vllm:num_requests_running{model_name="a\x00\x1b]0;x\x07"} 1\n')
    ran = run_infmon("scrape", str(page), home=tmp_path)
    assert ran.returncode == 2
    assert_clean_run(ran)
    assert ran.stderr.count("\n") == 1 and "NUL byte" in ran.stderr
