"""Request records ↔ rows of the ``records`` table (``docs/journal.md``).

A row keeps the send time as a float and every other time as integer microseconds after it:
the first and last content chunk, the stream's end, and the gaps between successive chunks as a
little-endian ``int32`` blob (``int64`` when a gap exceeds 35 minutes: the blob's length says
which). The rounding is the JSON-lines codec's (``round((t - sent) * 1e6)``), so a record reads
back equal to the microsecond, and the chunk offsets of a whole batch are computed in one numpy
pass on the writer's thread.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from infmon.model.records.columns import US
from infmon.model.records.request import RequestRecord
from infmon.model.records.server_timing import ServerTiming, decode_timing, encode_timing

_I32_MAX = 2**31 - 1
RECORD_SCHEMA = (
    ("worker", "INTEGER NOT NULL"),
    ("request_id", "INTEGER NOT NULL"),
    ("sent_s", "REAL NOT NULL"),
    ("first_us", "INTEGER"),
    ("last_us", "INTEGER"),
    ("end_us", "INTEGER"),
    ("chunks", "INTEGER NOT NULL"),
    ("gaps_us", "BLOB"),
    ("chunk_tokens", "BLOB"),
    ("chunk_token_sum", "INTEGER"),
    ("prompt_tokens", "INTEGER"),
    ("output_tokens", "INTEGER"),
    ("finish_reason", "TEXT"),
    ("http_status", "INTEGER"),
    ("error_kind", "TEXT"),
    ("error_message", "TEXT"),
    ("step", "INTEGER NOT NULL"),
    ("concurrency", "INTEGER"),
    ("rate", "REAL"),
    ("warmup", "INTEGER NOT NULL"),
    ("output_text", "TEXT"),
    ("usage_rejected", "TEXT"),
    ("prompt_tokens_requested", "INTEGER"),
    ("endpoint", "INTEGER"),
    ("server_metrics", "TEXT"),
    ("task", "TEXT"),
)
"""The ``records`` table (``docs/journal.md``). A column added later must be nullable: a writer
adds it to older journals (``ALTER TABLE``) and a reader reads it as NULL where it is absent."""
RECORD_COLUMNS = tuple(name for name, _ in RECORD_SCHEMA)
INSERT_RECORD = (
    f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(RECORD_COLUMNS))})"
)


def _tokens(r: RequestRecord, chunks: int) -> tuple[bytes | None, int | None]:
    ct = r.chunk_tokens
    if not ct:
        return None, None
    if len(ct) == chunks and ct.count(1) == chunks:
        return None, chunks
    return np.asarray(ct, dtype="<i8").astype("<i4").tobytes(), int(sum(ct))


def record_rows(
    records: Sequence[RequestRecord],
    worker: int = 0,
    endpoints: Sequence[int | None] | None = None,
) -> list[tuple[Any, ...]]:
    """One row per record, the chunk offsets of the whole batch computed at once;
    ``endpoints[i]`` is the index (in the ``target`` event's ``urls``) that served record i."""
    n = len(records)
    lengths = np.fromiter((len(r.chunk_times_s) for r in records), np.int64, n)
    total = int(lengths.sum())
    sent = np.fromiter((r.sent_s for r in records), float, n)
    flat = np.fromiter(
        itertools.chain.from_iterable(r.chunk_times_s for r in records), float, total
    )
    offsets = np.rint((flat - np.repeat(sent, lengths)) * US).astype(np.int64)
    gaps = np.diff(offsets) if total else offsets
    wide = bool(gaps.size) and int(np.abs(gaps).max()) > _I32_MAX
    blob = gaps.astype("<i8" if wide else "<i4").tobytes()
    size = 8 if wide else 4
    start = np.concatenate(([0], np.cumsum(lengths))).tolist()
    off = offsets.tolist()
    rows = []
    for i, r in enumerate(records):
        s, e = start[i], start[i + 1]
        chunks = e - s
        end = r.end_s
        tokens, token_sum = _tokens(r, chunks)
        rows.append(
            (
                worker,
                r.request_id,
                r.sent_s,
                off[s] if chunks else None,
                off[e - 1] if chunks else None,
                None if end != end else round((end - r.sent_s) * US),
                chunks,
                blob[size * s : size * (e - 1)] if chunks > 1 else None,
                tokens,
                token_sum,
                r.prompt_tokens,
                r.output_tokens,
                r.finish_reason,
                r.http_status,
                r.error_kind,
                r.error_message,
                r.step,
                r.concurrency,
                r.rate,
                int(r.warmup),
                r.output_text,
                r.usage_rejected,
                r.prompt_tokens_requested,
                endpoints[i] if endpoints is not None else None,
                None if r.server is None else json.dumps(encode_timing(r.server)),
                r.task,
            )
        )
    return rows


def gaps_of(blob: bytes | None, chunks: int) -> np.ndarray:
    """The ``chunks - 1`` gaps of one row's blob (``int32``, or ``int64`` by its length)."""
    if not blob or chunks < 2:
        return np.empty(0, np.int64)
    dtype = "<i8" if len(blob) == 8 * (chunks - 1) else "<i4"
    return np.frombuffer(blob, dtype=dtype).astype(np.int64)


def row_record(row: Sequence[Any]) -> RequestRecord:
    """A ``RequestRecord`` from a row in ``RECORD_COLUMNS`` order (times as the codec decodes)."""
    (_, rid, sent, first, _last, end, chunks, gaps, tokens, token_sum, *rest) = row
    times: tuple[float, ...] = ()
    if chunks:
        acc = itertools.accumulate(gaps_of(gaps, chunks).tolist(), initial=first)
        times = tuple([sent + a / US for a in acc])
    if tokens is not None:
        chunk_tokens = tuple(np.frombuffer(tokens, dtype="<i4").tolist())
    else:
        chunk_tokens = (1,) * chunks if token_sum is not None else ()
    prompt, output, finish, status, kind, message, step, conc, rate, warmup, text, *more = rest
    usage_rejected, requested, _endpoint, server, task = [*more, None, None, None, None, None][:5]
    return RequestRecord(
        int(rid),
        float(sent),
        times,
        float("nan") if end is None else sent + end / US,
        chunk_tokens,
        prompt,
        output,
        finish,
        status,
        kind,
        message,
        int(step),
        conc,
        rate,
        bool(warmup),
        text,
        usage_rejected=usage_rejected,
        prompt_tokens_requested=requested,
        server=server_of(server),
        task=task,
    )


def server_of(text: str | None) -> ServerTiming | None:
    """The ``server_metrics`` column (JSON of ``encode_timing``) back, or None."""
    if not text:
        return None
    try:
        return decode_timing(json.loads(text))
    except ValueError:
        return None
