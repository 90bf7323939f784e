"""The journal read as columns equals the journal read as records, for every statistic."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infmon.journal import JournalWriter, SessionReader
from infmon.model.records.columns import RecordColumns
from infmon.model.records.figures import summarize, summarize_columns
from infmon.model.records.measures import SLO
from tests.unit.test_columns import _same, records


@st.composite
def sharded(draw: st.DrawFn) -> list[tuple[int, object]]:
    n = draw(st.integers(1, 25))
    return [(draw(st.sampled_from((0, 0, 1, 2))), draw(records(i))) for i in range(n)]


def _write(path: Path, items) -> None:
    with JournalWriter(path, autoflush=False) as j:
        for worker, rec in items:
            j.write_record(rec, worker=worker)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=sharded(), wide=st.booleans())
def test_columns_from_the_journal_equal_its_records(items, wide):
    if wide:  # one stream with a gap over 35 minutes: an int64 gap blob
        worker, rec = items[0]
        times = rec.chunk_times_s
        if len(times) >= 2:
            items[0] = (
                worker,
                rec.__class__(**{**_fields(rec), "chunk_times_s": (*times, times[-1] + 2200.0)}),
            )
    with tempfile.TemporaryDirectory() as tmp:
        _write(Path(tmp), items)
        reader = SessionReader(Path(tmp))
        decoded = list(reader.iter_records())
        cols = reader.read_columns()
        expect = RecordColumns.from_records(decoded)
        for name in (
            "request_id",
            "sent_s",
            "first_us",
            "last_us",
            "end_us",
            "chunks",
            "step",
            "output_tokens",
            "prompt_tokens",
            "concurrency",
            "http_status",
            "warmup",
            "chunk_token_sum",
            "chunk_start",
            "chunk_us",
        ):
            assert np.array_equal(getattr(cols, name), getattr(expect, name)), name
        assert cols.error_kind_at(cols.error_code) == expect.error_kind_at(expect.error_code)
        slo = SLO(ttft_s=0.5, tpot_s=0.05)
        for step in {r.step for r in decoded}:
            mine = [r for r in decoded if r.step == step]
            assert _same(
                summarize(mine, 10.0, slo),
                summarize_columns(reader.read_columns(step=step), 10.0, slo),
            )


def _fields(rec) -> dict:
    return {k: getattr(rec, k) for k in rec.__dataclass_fields__}


def test_running_offsets_fall_back_when_a_stored_last_offset_disagrees():
    from infmon.journal.sqlcols import _running_offsets

    counts = np.array([3, 0, 2, 1], dtype=np.int64)
    start = np.array([0, 3, 3, 5, 6], dtype=np.int64)
    first = np.array([10, -1, 7, 4], dtype=np.int64)
    gaps = np.array([1, 2, 5], dtype=np.int64)
    expect = [10, 11, 13, 7, 12, 4]
    good_last = np.array([13, -1, 12, 4], dtype=np.int64)
    assert _running_offsets(first, good_last, counts, start, gaps).tolist() == expect
    bad_last = np.array([99, -1, 12, 4], dtype=np.int64)  # a damaged row
    assert _running_offsets(first, bad_last, counts, start, gaps).tolist() == expect
