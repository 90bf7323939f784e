"""The columnar path of the step statistics gives exactly the figures of ``summarize``."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.journal.codec import decode_record, encode_record
from infmon.model.records.columns import RecordColumns
from infmon.model.records.figures import summarize, summarize_columns
from infmon.model.records.measures import SLO
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.records.stats import StepStats

_KINDS = (None, None, None, ErrorKind.HTTP, ErrorKind.CANCELLED, ErrorKind.TIMEOUT)


@st.composite
def records(draw: st.DrawFn, rid: int) -> RequestRecord:
    sent = draw(st.floats(0.0, 1e6, allow_nan=False))
    gaps = draw(st.lists(st.floats(0.0, 2.0), max_size=40))
    times = tuple(itertools.accumulate(gaps, initial=sent))[1:]
    kind = draw(st.sampled_from(_KINDS))
    tokens = draw(st.sampled_from(("ones", "none", "multi")))
    chunk_tokens: tuple[int, ...] = ()
    if tokens == "ones":
        chunk_tokens = (1,) * len(times)
    elif tokens == "multi":
        chunk_tokens = tuple(draw(st.integers(1, 4)) for _ in times)
    end = draw(st.one_of(st.just(math.nan), st.floats(0.0, 1.0)))
    return RequestRecord(
        request_id=rid,
        sent_s=sent,
        chunk_times_s=times,
        end_s=end if math.isnan(end) else (times[-1] if times else sent) + end,
        chunk_tokens=chunk_tokens,
        prompt_tokens=draw(st.one_of(st.none(), st.integers(0, 4096))),
        output_tokens=draw(st.one_of(st.none(), st.integers(0, 64))),
        finish_reason=draw(st.sampled_from((None, "length", "stop", "=HYPERLINK()"))),
        http_status=draw(st.sampled_from((None, 200, 500))),
        error_kind=kind,
        step=draw(st.integers(0, 3)),
        concurrency=draw(st.sampled_from((None, 4))),
        warmup=draw(st.booleans()),
    )


@st.composite
def sessions(draw: st.DrawFn) -> list[RequestRecord]:
    n = draw(st.integers(0, 30))
    recs = [draw(records(i)) for i in range(n)]
    # On the journal's grid (µs after each send time), as every report reads them.
    return [decode_record(json.loads(json.dumps(encode_record(r)))) for r in recs]


def _same(a: StepStats, b: StepStats) -> bool:
    return json.dumps(a.to_dict(), sort_keys=True) == json.dumps(
        b.to_dict(), sort_keys=True
    ) and all(
        (x == y) or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
        for x, y in zip(_flat(a), _flat(b), strict=True)
    )


def _flat(s: StepStats) -> list[object]:
    out: list[object] = []
    for name in s.__slots__:  # type: ignore[attr-defined]
        v = getattr(s, name)
        out.extend(getattr(v, k) for k in v.__slots__) if hasattr(v, "p50") else out.append(v)
    return out


@settings(max_examples=120, deadline=None)  # 300 took ~50 s of a loaded fast suite
@given(
    recs=sessions(),
    duration=st.one_of(st.none(), st.floats(0.5, 100.0)),
    slo=st.sampled_from((None, SLO(ttft_s=0.5), SLO(ttft_s=1.0, tpot_s=0.05, e2el_s=20.0))),
    achieved=st.one_of(st.none(), st.just(3.5)),
)
def test_columns_give_exactly_the_figures_of_summarize(recs, duration, slo, achieved):
    kw = dict(concurrency=4, achieved_concurrency=achieved, loop_lag_p99_s=0.01)
    by_records = summarize(recs, duration, slo, **kw)
    by_columns = summarize_columns(RecordColumns.from_records(recs), duration, slo, **kw)
    assert _same(by_records, by_columns), (by_records, by_columns)


@settings(max_examples=100, deadline=None)
@given(recs=sessions(), pick=st.lists(st.integers(0, 29), max_size=20))
def test_take_and_concat_keep_every_record(recs, pick):
    cols = RecordColumns.from_records(recs)
    mask = cols.ok & ~cols.warmup
    assert np.array_equal(cols.pooled_itl_s(mask), cols.take(mask).pooled_itl_s())
    idx = np.array([i for i in pick if i < len(recs)], dtype=np.int64)
    part = cols.take(idx)
    expect = RecordColumns.from_records([recs[i] for i in idx.tolist()])
    for a, b in (
        (part, expect),
        (RecordColumns.concat([part, cols]), RecordColumns.concat([expect, cols])),
    ):
        assert np.array_equal(a.ttft_s, b.ttft_s, equal_nan=True)
        assert np.array_equal(a.pooled_itl_s(), b.pooled_itl_s())
        assert a.error_kind_at(a.error_code) == b.error_kind_at(b.error_code)
        assert np.array_equal(a.output_token_count, b.output_token_count)


def test_raw_float_records_agree_to_the_microsecond():
    """Live records are not on the µs grid: the columns round as the journal does."""
    recs = [
        RequestRecord(i, 10.0 + i / 7, tuple(10.0 + i / 7 + k / 3 for k in range(1, 6)), 13.0 + i)
        for i in range(20)
    ]
    a, b = summarize(recs, 10.0), summarize_columns(RecordColumns.from_records(recs), 10.0)
    assert abs(a.ttft.mean - b.ttft.mean) < 1e-6 and abs(a.itl.p99 - b.itl.p99) < 2e-6
    assert a.completed == b.completed and a.output_tokens == b.output_tokens
