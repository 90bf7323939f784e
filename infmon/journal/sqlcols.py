"""Read the ``records`` table of one journal file straight into ``RecordColumns``.

One query fetches every numeric column (text columns coded by SQL ``CASE`` against their
distinct values) and ``numpy.fromiter`` packs the rows' values into one array without a Python
list in between; a second query, in the same read transaction and the same order, fetches the
chunk-gap blobs, joined into one buffer and turned into per-chunk offsets with one cumulative
sum. Time and step filters use the table's indexes.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Sequence
from typing import Any

import numpy as np

from infmon.journal.rows import gaps_of
from infmon.model.columns import RecordColumns

_I64 = np.int64
_NUMERIC = (
    "worker",
    "request_id",
    "sent_s",
    "ifnull(first_us, -1)",
    "ifnull(last_us, -1)",
    "ifnull(end_us, -1)",
    "chunks",
    "ifnull(chunk_token_sum, -1)",
    "ifnull(output_tokens, -1)",
    "ifnull(prompt_tokens, -1)",
    "step",
    "ifnull(concurrency, -1)",
    "ifnull(rate, -1.0)",
    "warmup",
    "ifnull(http_status, -1)",
    "ifnull(length(gaps_us), 0)",
)


def where_clause(
    step: int | None, since_s: float | None, until_s: float | None
) -> tuple[str, list[Any]]:
    """``WHERE …`` over the indexed columns (send time in ``[since_s, until_s)``)."""
    cond: list[str] = []
    args: list[Any] = []
    if step is not None:
        cond.append("step = ?")
        args.append(step)
    if since_s is not None:
        cond.append("sent_s >= ?")
        args.append(since_s)
    if until_s is not None:
        cond.append("sent_s < ?")
        args.append(until_s)
    return (" WHERE " + " AND ".join(cond)) if cond else "", args


def _vocab(db: sqlite3.Connection, column: str, where: str, args: list[Any]) -> tuple[Any, ...]:
    found = [v for (v,) in db.execute(f"SELECT DISTINCT {column} FROM records{where}", args)]
    return (None, *sorted(v for v in found if v is not None))


def _case(column: str, vocab: Sequence[Any]) -> tuple[str, list[Any]]:
    if len(vocab) == 1:
        return "0", []
    whens = " ".join("WHEN ? THEN ?" for _ in vocab[1:])
    args: list[Any] = []
    for code, value in enumerate(vocab[1:], start=1):
        args += [value, code]
    return f"CASE {column} {whens} ELSE 0 END", args


def read_columns(
    db: sqlite3.Connection,
    step: int | None = None,
    since_s: float | None = None,
    until_s: float | None = None,
    chunks: bool = True,
) -> RecordColumns:
    """The matching records of one journal file, in the order they were written."""
    where, args = where_clause(step, since_s, until_s)
    db.execute("BEGIN")  # one snapshot for every query below, while a writer may append
    try:
        kinds = _vocab(db, "error_kind", where, args)
        reasons = _vocab(db, "finish_reason", where, args)
        kind_sql, kind_args = _case("error_kind", kinds)
        reason_sql, reason_args = _case("finish_reason", reasons)
        sql = (
            f"SELECT {', '.join(_NUMERIC)}, {kind_sql}, {reason_sql} FROM records{where} "
            "ORDER BY rowid"
        )
        width = len(_NUMERIC) + 2
        cur = db.execute(sql, kind_args + reason_args + args)
        flat = np.fromiter(itertools.chain.from_iterable(cur), dtype=float)
        table = flat.reshape(-1, width)
        blobs = None
        if chunks:
            blobs = db.execute(
                f"SELECT ifnull(gaps_us, X'') FROM records{where} ORDER BY rowid", args
            )
            cols = _columns(table, kinds, reasons, blobs)
        else:
            cols = _columns(table, kinds, reasons, None)
    finally:
        db.execute("COMMIT")
    return cols


def _columns(
    t: np.ndarray, kinds: tuple[Any, ...], reasons: tuple[Any, ...], blobs: Any
) -> RecordColumns:
    ints = t.astype(_I64)
    rate = t[:, 12].copy()
    rate[rate == -1.0] = np.nan
    counts = ints[:, 6]
    start = chunk_us = None
    if blobs is not None:
        start = np.zeros(counts.size + 1, _I64)
        np.cumsum(counts, out=start[1:])
        chunk_us = _chunk_offsets(ints[:, 3], counts, start, ints[:, 15], blobs)
    return RecordColumns(
        request_id=ints[:, 1],
        worker=ints[:, 0],
        sent_s=t[:, 2].copy(),
        first_us=ints[:, 3],
        last_us=ints[:, 4],
        end_us=ints[:, 5],
        chunks=counts,
        chunk_token_sum=ints[:, 7],
        output_tokens=ints[:, 8],
        prompt_tokens=ints[:, 9],
        step=ints[:, 10],
        concurrency=ints[:, 11],
        rate=rate,
        warmup=ints[:, 13].astype(bool),
        http_status=ints[:, 14],
        error_code=ints[:, 16],
        finish_code=ints[:, 17],
        error_kinds=kinds,
        finish_reasons=reasons,
        chunk_start=start,
        chunk_us=chunk_us,
    )


def _chunk_offsets(
    first_us: np.ndarray, counts: np.ndarray, start: np.ndarray, sizes: np.ndarray, blobs: Any
) -> np.ndarray:
    """Per-chunk offsets after send: each record's first offset, then its running gap sum."""
    raw = b"".join(itertools.chain.from_iterable(blobs))
    n_gaps = np.maximum(counts - 1, 0)
    if np.array_equal(sizes, 4 * n_gaps):
        gaps = np.frombuffer(raw, dtype="<i4").astype(_I64)
    else:  # a record with a gap over 35 minutes has an int64 blob: split row by row
        ends = np.cumsum(sizes).tolist()
        parts = [
            gaps_of(raw[e - size : e], n)
            for e, size, n in zip(ends, sizes.tolist(), counts.tolist(), strict=True)
        ]
        gaps = np.concatenate(parts) if parts else np.empty(0, _I64)
    total = int(start[-1])
    values = np.empty(total, _I64)
    has = counts > 0
    heads = start[:-1][has]
    is_head = np.zeros(total, dtype=bool)
    is_head[heads] = True
    values[heads] = first_us[has]
    values[~is_head] = gaps
    running = np.cumsum(values)
    base = np.repeat(running[heads] - values[heads], counts[has])
    return running - base
