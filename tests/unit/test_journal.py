"""The session journal: round trip, redaction, shards, flushing without close, the old codec."""

from __future__ import annotations

import itertools
import json
import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.clock import FakeClock
from infmon.journal import JournalWriter, SessionReader
from infmon.journal.codec import decode_record, encode_record
from infmon.journal.redact import REDACTED, redact
from infmon.model.records.request import RequestRecord
from infmon.model.server.snapshot import ServerSnapshot


def _rec(i: int, **kw) -> RequestRecord:
    sent = 1000.0 + i
    base = dict(
        request_id=i,
        sent_s=sent,
        chunk_times_s=(sent + 0.1234567, sent + 0.15, sent + 0.2),
        end_s=sent + 0.2001,
        chunk_tokens=(1, 1, 1),
        prompt_tokens=12,
        output_tokens=3,
        finish_reason="length",
        http_status=200,
        step=2,
        concurrency=8,
    )
    base.update(kw)
    return RequestRecord(**base)


@pytest.mark.parametrize(
    "rec",
    [
        _rec(1),
        _rec(2, chunk_tokens=(2, 3, 1), output_tokens=None, warmup=True, output_text="<b>hi</b>"),
        _rec(
            3,
            chunk_times_s=(),
            end_s=math.nan,
            chunk_tokens=(),
            output_tokens=None,
            error_kind="http",
            error_message="HTTP 500",
            http_status=500,
            step=0,
        ),
        _rec(4, rate=2.5, concurrency=None),
    ],
)
def test_codec_round_trip_to_the_microsecond(rec):
    back = decode_record(json.loads(json.dumps(encode_record(rec))))
    assert back.request_id == rec.request_id
    assert len(back.chunk_times_s) == len(rec.chunk_times_s)
    for a, b in zip(back.chunk_times_s, rec.chunk_times_s, strict=True):
        assert abs(a - b) < 1e-6
    assert (math.isnan(back.end_s) and math.isnan(rec.end_s)) or abs(back.end_s - rec.end_s) < 1e-6
    for name in (
        "chunk_tokens",
        "prompt_tokens",
        "output_tokens",
        "finish_reason",
        "http_status",
        "error_kind",
        "error_message",
        "step",
        "concurrency",
        "rate",
        "warmup",
        "output_text",
    ):
        assert getattr(back, name) == getattr(rec, name), name
    assert back.ttft_s == pytest.approx(rec.ttft_s, abs=1e-6, nan_ok=True)
    assert back.tpot_s == pytest.approx(rec.tpot_s, abs=1e-6, nan_ok=True)


@settings(max_examples=200, deadline=None)
@given(sent=st.floats(0.0, 1e7), gaps=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=300))
def test_long_chunk_lists_encode_as_the_plain_path_does(sent, gaps):
    """Above ``_NUMPY_FROM`` chunks the gaps come from numpy: the very integers the plain
    per-chunk arithmetic gives, so journals do not depend on a record's length."""
    times = tuple(itertools.accumulate(gaps, initial=sent))[1:]
    rec = _rec(7, sent_s=sent, chunk_times_s=times, chunk_tokens=(1,) * len(times), end_s=times[-1])
    offsets = [round((t - sent) * 1_000_000) for t in times]
    assert encode_record(rec)["c"] == [offsets[0], *(b - a for a, b in itertools.pairwise(offsets))]
    assert encode_record(rec)["k"] == 1


def test_redaction_masks_secrets_keeps_token_counts():
    cfg = {
        "api_key": "sk-123",
        "max_tokens": 64,
        "prompt_tokens": 128,
        "headers": {"Authorization": "Bearer abc", "X-Trace": "ok"},
        "nested": [{"password": "pw", "hf_token": "hf_x"}],
        "url": "http://user:pa55@host:8000/v1",
        "note": "curl -H 'Authorization: Bearer zzz'",
        "empty_token": None,
    }
    out = redact(cfg)
    text = json.dumps(out)
    for secret in ("sk-123", "abc", "pw", "hf_x", "pa55", "zzz"):
        assert secret not in text
    assert out["api_key"] == REDACTED and out["headers"]["X-Trace"] == "ok"
    assert out["max_tokens"] == 64 and out["prompt_tokens"] == 128
    assert out["url"].startswith("http://user:") and out["url"].endswith("@host:8000/v1")
    assert out["empty_token"] is None


def test_writer_reader_round_trip(tmp_path):
    clock = FakeClock(50.0)
    with JournalWriter(tmp_path, clock=clock, autoflush=False) as j:
        j.write_config({"url": "http://x", "api_key": "sk-secret"})
        for i in range(5):
            j.write_record(_rec(i))
        clock.advance(1.0)
        j.write_scrape({"running": 3, "kv_usage_fraction": float("nan")})
        j.write_event("mark", label="fp8 on")
    r = SessionReader(tmp_path)
    assert b"sk-secret" not in (tmp_path / "journal.sqlite").read_bytes()
    assert r.format == "sqlite" and r.config["url"] == "http://x"
    assert r.origin_s() == 50.0
    assert [x.request_id for x in r.iter_records()] == [0, 1, 2, 3, 4]
    for back, rec in zip(r.iter_records(), [_rec(i) for i in range(5)], strict=True):
        assert back.chunk_times_s == pytest.approx(rec.chunk_times_s, abs=1e-6)
        assert back.sent_s == rec.sent_s and back.step == rec.step
    [scrape] = list(r.iter_scrapes())
    assert scrape["t"] == 51.0 and scrape["snap"] == {"running": 3}  # unknown: absent
    event, end = list(r.iter_events())
    assert end["kind"] == "session_end"
    assert event["kind"] == "mark" and event["label"] == "fp8 on" and event["t"] == 51.0


def test_records_read_back_equal_to_the_microsecond(tmp_path):
    recs = [
        _rec(1),
        _rec(2, chunk_tokens=(2, 3, 1), output_tokens=None, warmup=True, output_text="<b>hi</b>"),
        _rec(3, chunk_times_s=(), end_s=math.nan, chunk_tokens=(), error_kind="http", step=0),
        _rec(4, rate=2.5, concurrency=None, chunk_times_s=(1004.5,), chunk_tokens=()),
        _rec(5, chunk_times_s=(1005.1, 1005.1 + 3000.0), chunk_tokens=(1, 1)),  # a 50-minute gap
    ]
    with JournalWriter(tmp_path, autoflush=False) as j:
        for r in recs:
            j.write_record(r)
    back = list(SessionReader(tmp_path).iter_records())
    expect = [decode_record(json.loads(json.dumps(encode_record(r)))) for r in recs]
    for a, b in zip(back, expect, strict=True):
        assert a.chunk_times_s == pytest.approx(b.chunk_times_s, abs=1e-6)
        assert math.isnan(a.end_s) == math.isnan(b.end_s)
        for name in (
            "chunk_tokens",
            "output_tokens",
            "error_kind",
            "warmup",
            "output_text",
            "rate",
        ):
            assert getattr(a, name) == getattr(b, name), name


def test_worker_shards_are_merged_by_send_time(tmp_path):
    with JournalWriter(tmp_path, autoflush=False) as j:
        for i in (0, 2, 4):
            j.write_record(_rec(i), worker=0)
        for i in (1, 3):
            j.write_record(_rec(i), worker=1)
    assert (tmp_path / "journal.w1.sqlite").exists()
    r = SessionReader(tmp_path)
    assert [x.request_id for x in r.iter_records()] == [0, 1, 2, 3, 4]
    cols = r.read_columns()
    assert cols.request_id.tolist() == [0, 1, 2, 3, 4] and cols.worker.tolist() == [0, 1, 0, 1, 0]
    assert r.read_columns(since_s=1001.0, until_s=1003.0).request_id.tolist() == [1, 2]


def test_step_and_time_filters_use_the_index(tmp_path):
    with JournalWriter(tmp_path, autoflush=False) as j:
        for i in range(30):
            j.write_record(_rec(i, step=i // 10))
    r = SessionReader(tmp_path)
    assert r.steps() == [0, 1, 2]
    assert r.read_columns(step=1).request_id.tolist() == list(range(10, 20))
    assert [s for s, _ in r.iter_step_columns()] == [0, 1, 2]
    plan = " ".join(
        str(row)
        for db in r.shards()
        for row in db.execute("EXPLAIN QUERY PLAN SELECT * FROM records WHERE step = 1")
    )
    assert "records_step" in plan


def test_background_flush_without_close(tmp_path):
    j = JournalWriter(tmp_path, flush_interval_s=0.05)
    try:
        j.write_record(_rec(7))
        j.write_event("m")
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            r = SessionReader(tmp_path)
            if list(r.iter_records()) and list(r.iter_events()):
                break
            time.sleep(0.02)
        assert [x.request_id for x in SessionReader(tmp_path).iter_records()] == [7]
    finally:
        j.close()
    with pytest.raises(ValueError):
        j.write_record(_rec(8))


def test_a_scrape_is_a_snapshot_or_its_keys_without_the_empty_ones(tmp_path):
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_scrape(ServerSnapshot(timestamp_s=3.5, waiting=0.0))
        j.write_scrape({"timestamp_s": 4.5, "waiting": 0, "backend": None, "models": []})
    first, second = SessionReader(tmp_path).iter_scrapes()
    assert first["t"] == 3.5 and first["snap"]["waiting"] == 0
    assert first["snap"]["state"] == "ok" and "backend" not in first["snap"]
    assert "models" not in first["snap"] and "engines" not in first["snap"]
    assert second["t"] == 4.5 and second["snap"] == {"timestamp_s": 4.5, "waiting": 0}


def test_a_killed_writer_loses_only_what_was_not_flushed(tmp_path):
    j = JournalWriter(tmp_path, autoflush=False)
    j.write_record(_rec(1))
    j.flush()
    j.write_record(_rec(2))
    j.abandon()  # as SIGKILL: no close, no checkpoint, the WAL left beside the database
    assert [x.request_id for x in SessionReader(tmp_path).iter_records()] == [1]
    with JournalWriter(tmp_path, autoflush=False) as again:  # the lock died with its owner
        again.write_record(_rec(3))
    assert [x.request_id for x in SessionReader(tmp_path).iter_records()] == [1, 3]


@pytest.mark.skipif(not hasattr(__import__("sqlite3").Connection, "setlimit"), reason="3.11+")
def test_gap_blobs_past_sqlites_value_limit_are_read_row_by_row(tmp_path):
    import sqlite3

    with JournalWriter(tmp_path, autoflush=False) as j:
        for i in range(50):
            j.write_record(_rec(i))
    r = SessionReader(tmp_path)
    whole = r.read_columns()
    r.shards()[0].setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 200)  # the 50 blobs are 400 bytes
    again = r.read_columns()
    assert again.chunk_us.tolist() == whole.chunk_us.tolist() and len(again) == 50


def test_token_counts_too_large_to_pack_are_read_exactly(tmp_path):
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_record(_rec(1))
        j.write_record(_rec(2, output_tokens=10**9, prompt_tokens=2**40))
    cols = SessionReader(tmp_path).read_columns()
    assert cols.output_tokens.tolist() == [3, 10**9]
    assert cols.prompt_tokens.tolist() == [12, 2**40]
    assert cols.chunks.tolist() == [3, 3] and cols.chunk_token_sum.tolist() == [3, 3]


def test_a_journal_from_before_a_column_was_added(tmp_path):
    """The schema grows by nullable columns: older files read as NULL there, writers add it."""
    import sqlite3

    from infmon.journal.rows import RECORD_SCHEMA

    newest = [name for name, _ in RECORD_SCHEMA[-4:]]
    assert newest == ["prompt_tokens_requested", "endpoint", "server_metrics", "task"]
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_record(_rec(1, prompt_tokens_requested=12))
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    for name in newest:  # as a file written before them
        db.execute(f"ALTER TABLE records DROP COLUMN {name}")
    db.commit()
    db.close()
    [old] = list(SessionReader(tmp_path).iter_records())
    assert old.request_id == 1 and old.prompt_tokens_requested is None
    assert old.server is None and old.task is None
    assert SessionReader(tmp_path).read_columns().prompt_tokens_requested.tolist() == [-1]
    assert SessionReader(tmp_path).read_columns().server is None
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_record(_rec(2, prompt_tokens_requested=12))
    back = list(SessionReader(tmp_path).iter_records())
    assert [r.prompt_tokens_requested for r in back] == [None, 12]
    assert SessionReader(tmp_path).endpoint_counts() == {}


def test_records_name_their_endpoint_and_worker_shard(tmp_path):
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_record(_rec(1), worker=0)
        j.write_record(_rec(2), worker=0, endpoint=1)
        j.write_record(_rec(3), worker=1, endpoint=0)
        j.write_record(_rec(4, error_kind="reset"), worker=1, endpoint=1)
    r = SessionReader(tmp_path)
    assert r.endpoint_counts() == {0: (1, 0), 1: (2, 1)}
    assert sorted(x.request_id for x in r.iter_records()) == [1, 2, 3, 4]
    assert (tmp_path / "journal.w1.sqlite").exists()
