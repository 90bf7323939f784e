"""``--metrics-port``'s exporter: vLLM's bucket boundaries, counts by outcome, served over HTTP
in the text format a Prometheus parses."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infmon.engine.types import RecordBatch
from infmon.exporter import TTFT_BUCKETS, ClientExporter
from infmon.model.records import RequestRecord


def rec(rid: int, ttft: float, *, error: str | None = None) -> RequestRecord:
    times = () if error else (ttft, ttft + 0.01, ttft + 0.02)
    return RequestRecord(
        request_id=rid,
        sent_s=0.0,
        chunk_times_s=times,
        end_s=ttft + 0.03,
        chunk_tokens=(1,) * len(times),
        prompt_tokens=16,
        output_tokens=len(times),
        finish_reason=None if error else "length",
        http_status=500 if error == "http_5xx" else 200,
        error_kind=error,
        step=1,
    )


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_buckets_counts_and_the_page() -> None:
    ex = ClientExporter(lambda: ("closed", 8.0), lambda: 2)
    ex.records(RecordBatch(0, [rec(1, 0.02), rec(2, 0.02), rec(3, 0.3)]))
    ex.records(RecordBatch(1, [rec(4, 0.0, error="http_5xx"), rec(5, 0.0, error="cancelled")]))
    host, port = ex.start("127.0.0.1", 0)
    try:
        page = httpx.get(f"http://{host}:{port}/metrics", timeout=5).text
    finally:
        ex.stop()
    fam = families(page)
    req = {s.labels["outcome"]: s.value for s in fam["infmon_requests"].samples}
    assert req == {"ok": 3, "failed": 1, "cancelled": 1}
    errors = {s.labels["kind"]: s.value for s in fam["infmon_request_errors"].samples}
    assert errors == {"http_5xx": 1}
    buckets = {
        s.labels["le"]: s.value
        for s in fam["infmon_ttft_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert [float(le) for le in buckets if le != "+Inf"] == list(TTFT_BUCKETS)
    assert buckets["0.01"] == 0 and buckets["0.02"] == 2  # le: 0.02 falls in its own bucket
    assert buckets["0.25"] == 2 and buckets["0.5"] == 3 and buckets["+Inf"] == 3
    gauges = {f: fam[f].samples[0].value for f in ("infmon_target_concurrency", "infmon_workers")}
    assert gauges == {"infmon_target_concurrency": 8.0, "infmon_workers": 2.0}
