"""``--metrics-port``'s exporter: vLLM's bucket boundaries, counts by outcome, served over HTTP
in the text format a Prometheus parses."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from infmon.engine.types import RecordBatch
from infmon.exporter import FAILURE_KINDS, TTFT_BUCKETS, ClientExporter
from infmon.model.records.request import RequestRecord


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
    assert errors.pop("http_5xx") == 1
    # every known failure kind is there from the start, at zero (issue 31 finding 7)
    assert errors == {kind: 0 for kind in FAILURE_KINDS}
    assert {"timeout", "connect", "worker_lost"} <= set(errors)
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


def scrape(address: tuple[str, int]) -> dict:
    return families(httpx.get(f"http://{address[0]}:{address[1]}/metrics", timeout=5).text)


def ok_count(fam: dict) -> float:
    return next(s.value for s in fam["infmon_requests"].samples if s.labels["outcome"] == "ok")


def test_a_finished_run_holds_its_final_figures_until_prometheus_scrapes_them() -> None:
    ex = ClientExporter()
    address = ex.start("127.0.0.1", 0)
    ex.records(RecordBatch(0, [rec(1, 0.02)]))
    assert ok_count(scrape(address)) == 1  # a Prometheus is watching
    ex.records(RecordBatch(0, [rec(2, 0.02), rec(3, 0.02)]))  # the last second's requests
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(ex.stop(linger_s=30)))
    stopper.start()
    assert ok_count(scrape(address)) == 3  # still served, with the final figures
    stopper.join(timeout=10)
    assert stopped == [True]
    with pytest.raises(httpx.ConnectError):
        scrape(address)


def test_no_scrape_no_wait_and_the_wait_is_bounded() -> None:
    never = ClientExporter()
    never.start("127.0.0.1", 0)
    never.records(RecordBatch(0, [rec(1, 0.02)]))
    assert never.linger_bound_s(60) == 0  # nobody scrapes it: stop at once
    assert never.stop(linger_s=60) is False

    once = ClientExporter()
    address = once.start("127.0.0.1", 0)
    scrape(address)
    once.records(RecordBatch(0, [rec(1, 0.02)]))
    assert once.linger_bound_s(0.2) == 0.2  # one scrape: its interval is unknown
    t0 = time.monotonic()
    assert once.stop(linger_s=0.2) is False  # not scraped again: said, not waited for
    assert 0.15 < time.monotonic() - t0 < 5

    twice = ClientExporter()
    address = twice.start("127.0.0.1", 0)
    scrape(address)
    scrape(address)
    assert twice.linger_bound_s(60) < 30  # 2.5 of the interval seen between its two scrapes
    assert twice.stop(linger_s=60) is True  # nothing new since: nothing to wait for
