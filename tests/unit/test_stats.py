"""Step statistics against hand-computed values (vLLM's definitions, numpy linear percentiles)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.model.records.figures import summarize
from infmon.model.records.measures import SLO, Distribution
from infmon.model.records.request import ErrorKind, RequestRecord


def rec(rid: int, sent: float, chunks: tuple[float, ...], out: int | None, **kw) -> RequestRecord:
    end = chunks[-1] if chunks else sent + 0.01
    return RequestRecord(
        request_id=rid, sent_s=sent, chunk_times_s=chunks, end_s=end, output_tokens=out, **kw
    )


RECORDS = [
    rec(1, 0.0, (0.1, 0.2, 0.3, 0.5), 4, prompt_tokens=10),
    rec(2, 1.0, (1.3, 1.4), 2, prompt_tokens=10),
    rec(3, 2.0, (2.2,), 1, prompt_tokens=10),
    rec(4, 3.0, (), None, error_kind=ErrorKind.HTTP, http_status=500, error_message="HTTP 500"),
    rec(5, -1.0, (-0.9, -0.8), 2, warmup=True),
    rec(6, 4.0, (4.1,), None, error_kind=ErrorKind.CANCELLED),
]


def test_counts_and_throughputs() -> None:
    s = summarize(RECORDS, 10.0, concurrency=2, achieved_concurrency=1.9)
    assert (s.completed, s.failed, s.cancelled, s.warmup_excluded) == (3, 1, 1, 1)
    assert s.output_tokens == 7 and s.prompt_tokens == 30
    assert s.output_throughput_tok_s == pytest.approx(0.7)
    assert s.total_throughput_tok_s == pytest.approx(3.7)
    assert s.request_throughput_req_s == pytest.approx(0.3)
    assert s.error_rate == pytest.approx(0.25)
    assert s.errors_by_kind == (("http", 1),)
    assert not s.tokens_estimated


def test_latency_distributions_hand_computed() -> None:
    s = summarize(RECORDS, 10.0)
    # TTFT [0.1, 0.3, 0.2]: sorted [0.1, 0.2, 0.3]; p90 index 1.8 → 0.28, p99 index 1.98 → 0.298
    assert (s.ttft.mean, s.ttft.p50, s.ttft.p90, s.ttft.p99, s.ttft.max) == pytest.approx(
        (0.2, 0.2, 0.28, 0.298, 0.3)
    )
    # TPOT: (0.5-0.1)/3 and (0.4-0.3)/1; the 1-token request has none
    assert s.tpot.count == 2
    assert s.tpot.mean == pytest.approx((0.4 / 3 + 0.1) / 2)
    # ITL pooled [0.1, 0.1, 0.2, 0.1]: sorted [.1,.1,.1,.2], p90 index 2.7 → 0.17
    assert (s.itl.count, s.itl.mean, s.itl.p50, s.itl.p90) == pytest.approx((4, 0.125, 0.1, 0.17))
    # E2EL [0.5, 0.4, 0.2]
    assert (s.e2el.mean, s.e2el.p50) == pytest.approx((1.1 / 3, 0.4))


def test_goodput_and_slo_attainment() -> None:
    slo = SLO(ttft_s=0.25, tpot_s=0.12)
    s = summarize(RECORDS, 10.0, slo)
    # 1: TPOT 0.133 > 0.12; 2: TTFT 0.3 > 0.25; 3: one token, TTFT 0.2 → good
    assert s.goodput_req_s == pytest.approx(0.1)
    assert s.slo_attainment == pytest.approx(0.25)
    assert math.isnan(summarize(RECORDS, 10.0).goodput_req_s)


def test_chunk_counted_tokens_are_flagged() -> None:
    r = rec(1, 0.0, (0.1, 0.3, 0.4), None, chunk_tokens=(2, 3, 1))
    s = summarize([r], 1.0)
    assert s.tokens_estimated and s.output_tokens == 6
    assert s.tpot.p50 == pytest.approx(0.3 / 5)
    assert s.itl.mean == pytest.approx(0.15)


def test_empty_step_has_missing_values_not_zeros() -> None:
    s = summarize([], 5.0)
    assert s.completed == 0 and math.isnan(s.ttft.p50) and math.isnan(s.error_rate)
    d = s.to_dict()
    assert d["ttft_ms"]["p50"] is None and d["error_rate"] is None


def test_achieved_concurrency_from_records_when_not_given() -> None:
    recs = [rec(1, 0.0, (1.0, 2.0), 2), rec(2, 0.0, (1.0, 2.0), 2)]
    assert summarize(recs, 2.0).achieved_concurrency == pytest.approx(2.0)


def test_client_self_check_flags_shortfall_and_lag() -> None:
    s = summarize(RECORDS, 10.0, concurrency=16, achieved_concurrency=9.0, loop_lag_p99_s=0.2)
    assert s.client_limited and len(s.client_notes) == 2
    ok = summarize(RECORDS, 10.0, concurrency=2, achieved_concurrency=1.95, loop_lag_p99_s=0.001)
    assert not ok.client_limited


def test_to_dict_has_the_bench_schema_fields() -> None:
    d = summarize(RECORDS, 10.0, SLO(e2el_s=1.0), concurrency=4, achieved_concurrency=3.5).to_dict()
    for key in (
        "concurrency",
        "duration_s",
        "completed",
        "failed",
        "output_throughput_tok_s",
        "request_throughput_req_s",
        "goodput_req_s",
        "achieved_concurrency",
    ):
        assert key in d
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert set(d[key]) >= {"mean", "p50", "p90", "p95", "p99"}
    assert d["ttft_ms"]["p50"] == pytest.approx(200.0)
    assert "rate" not in d
    assert summarize(RECORDS, 10.0, rate=2.0).to_dict()["rate"] == 2.0


def test_distribution_ignores_nan() -> None:
    d = Distribution.of([1.0, math.nan, 3.0])
    assert d.count == 2 and d.mean == 2.0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 10.0), max_size=6), max_size=8))
def test_pooled_itl_is_every_records_gaps_in_order(chunk_lists):
    """The vectorized pooling equals the plain per-record list, empty and one-chunk records too."""
    from infmon.model.records.measures import pooled_itl_s

    recs = [
        RequestRecord(i, 0.0, tuple(sorted(times)), 11.0) for i, times in enumerate(chunk_lists)
    ]
    assert pooled_itl_s(recs).tolist() == [g for r in recs for g in r.itl_s]
