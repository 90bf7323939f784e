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
from dataclasses import replace
from typing import Any

import numpy as np

from infmon.journal.rows import gaps_of, server_of
from infmon.journal.store import record_columns
from infmon.model.records.columns import RecordColumns
from infmon.model.records.server_timing import ServerColumns

_I64 = np.int64
_PLAIN = (
    "request_id",
    "sent_s",
    "ifnull(first_us, -1)",
    "ifnull(last_us, -1)",
    "ifnull(end_us, -1)",
    "chunks",
    "ifnull(chunk_token_sum, -1)",
    "ifnull(output_tokens, -1)",
    "ifnull(prompt_tokens, -1)",
    "ifnull(rate, -1.0)",
    "ifnull(http_status, -1) + 1 + 2048 * (ifnull(concurrency, -1) + 1)",
)
"""The numeric columns (unknown = -1), in the order ``_columns`` reads them. Each value costs
~0.11 µs to fetch (and each row ~0.25 µs), so small fields share one: the HTTP status with the
concurrency here, and warm-up, error kind, finish reason and worker in ``_flags``."""
_T, _U = 2**21, 2**26
_PACKED = (
    *_PLAIN[:5],
    f"CASE WHEN chunks < {_T} AND ifnull(chunk_token_sum, -1) BETWEEN -1 AND {2**31 - 2} "
    f"THEN chunks + {_T} * (ifnull(chunk_token_sum, -1) + 1) ELSE -1 END",
    f"CASE WHEN ifnull(output_tokens, -1) BETWEEN -1 AND {_U - 2} "
    f"AND ifnull(prompt_tokens, -1) BETWEEN -1 AND {_U - 2} "
    f"THEN ifnull(output_tokens, -1) + 1 + {_U} * (ifnull(prompt_tokens, -1) + 1) ELSE -1 END",
    *_PLAIN[9:],
)
"""``_PLAIN`` with two more pairs packed (chunks with their token sum, output with prompt
tokens), exact below 2^53; a value out of range gives -1 and that query is made plain."""


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


_known: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [((None,), (None,))]
"""The error kinds and finish reasons seen so far (any vocabulary codes correctly; this one
saves work): a step's query codes them with ``CASE``, and only a value not seen yet costs a
``DISTINCT`` pass and a second query."""


def _numeric(
    db: sqlite3.Connection,
    kinds: tuple[Any, ...],
    reasons: tuple[Any, ...],
    step: int | None,
    where: str,
    args: list[Any],
) -> np.ndarray:
    """The rows' numbers as a float table in ``_PLAIN`` order, then flags, then the step."""
    flags_sql, flags_args = _flags(kinds, reasons)
    requested = (
        "ifnull(prompt_tokens_requested, -1)"
        if "prompt_tokens_requested" in record_columns(db)
        else "-1"
    )
    tail = [flags_sql] + (["step"] if step is None else []) + [requested]
    packed = _fetch(db, [*_PACKED, *tail], flags_args + args, where)
    if not packed.size or min(packed[:, 5].min(), packed[:, 6].min()) >= 0:
        tokens, usage = packed[:, 5].astype(_I64), packed[:, 6].astype(_I64)
        unpacked = np.column_stack(
            (tokens % _T, tokens // _T - 1, usage % _U - 1, usage // _U - 1)
        ).astype(float)
        return np.hstack((packed[:, :5], unpacked, packed[:, 7:]))
    return _fetch(db, [*_PLAIN, *tail], flags_args + args, where)


def _fetch(db: sqlite3.Connection, fields: list[str], args: list[Any], where: str) -> np.ndarray:
    sql = f"SELECT {', '.join(fields)} FROM records{where} ORDER BY rowid"
    table = np.fromiter(itertools.chain.from_iterable(db.execute(sql, args)), dtype=float)
    return table.reshape(-1, len(fields))


def _vocabs(
    db: sqlite3.Connection,
    where: str,
    args: list[Any],
    kinds_known: tuple[Any, ...],
    reasons_known: tuple[Any, ...],
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    pairs = db.execute(f"SELECT DISTINCT error_kind, finish_reason FROM records{where}", args)
    kinds, reasons = set(kinds_known), set(reasons_known)
    for kind, reason in pairs:
        kinds.add(kind)
        reasons.add(reason)
    return (
        (None, *sorted(v for v in kinds if v is not None)),
        (None, *sorted(v for v in reasons if v is not None)),
    )


def _flags(kinds: Sequence[Any], reasons: Sequence[Any]) -> tuple[str, list[Any]]:
    """``warmup + 2 * (error code + n_kinds * (finish code + n_reasons * worker))``, or ``-1``
    when a text value is not in its vocabulary."""
    kind_sql, kind_args = _case("error_kind", kinds)
    reason_sql, reason_args = _case("finish_reason", reasons)
    sql = (
        f"CASE WHEN ({kind_sql}) < 0 OR ({reason_sql}) < 0 THEN -1 ELSE warmup + 2 * (({kind_sql})"
        f" + {len(kinds)} * (({reason_sql}) + {len(reasons)} * worker)) END"
    )
    return sql, (kind_args + reason_args) * 2


def _case(column: str, vocab: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column``'s code in ``vocab`` (0 for NULL; ``-1`` for a value not in it)."""
    whens = "".join(" WHEN ? THEN ?" for _ in vocab[1:])
    args: list[Any] = []
    for code, value in enumerate(vocab[1:], start=1):
        args += [value, code]
    return (
        f"CASE WHEN {column} IS NULL THEN 0{whens.replace('WHEN ?', f'WHEN {column} = ?')} ELSE -1 END",
        args,
    )


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
        kinds, reasons = _known[0]
        if len(kinds) + len(reasons) == 2:  # nothing learnt yet: learn from these rows first
            kinds, reasons = _known[0] = _vocabs(db, where, args, kinds, reasons)
        table = _numeric(db, kinds, reasons, step, where, args)
        if table.size and table[:, 11].min() < 0:  # a kind or reason not seen before: learn
            kinds, reasons = _vocabs(db, where, args, kinds, reasons)
            _known[0] = (kinds, reasons)
            table = _numeric(db, kinds, reasons, step, where, args)
        blobs = _gap_bytes(db, where, args) if chunks else None
        cols = _columns(table, kinds, reasons, step, blobs, db, where, args)
        server = _server(db, where, args)
        if server is not None:
            cols = replace(cols, server=server)
    finally:
        db.execute("COMMIT")
    return cols


def _server(db: sqlite3.Connection, where: str, args: list[Any]) -> ServerColumns | None:
    """The server's per-request figures and task kinds, when this journal has any."""
    have = record_columns(db)
    if "server_metrics" not in have or "task" not in have:
        return None
    extra = "server_metrics IS NOT NULL OR task IS NOT NULL"
    sql = f"SELECT 1 FROM records{where}{' AND ' if where else ' WHERE '}({extra}) LIMIT 1"
    if db.execute(sql, args).fetchone() is None:
        return None
    rows = db.execute(f"SELECT server_metrics, task FROM records{where} ORDER BY rowid", args)
    timings, tasks = [], []
    for text, task in rows:
        timings.append(server_of(text))
        tasks.append(task if isinstance(task, str) else None)
    return ServerColumns.of(timings, tasks)


def _columns(
    t: np.ndarray,
    kinds: tuple[Any, ...],
    reasons: tuple[Any, ...],
    step: int | None,
    blobs: bytes | None,
    db: sqlite3.Connection,
    where: str,
    args: list[Any],
) -> RecordColumns:
    ints = t.astype(_I64)
    n = ints.shape[0]
    rate = t[:, 9].copy()
    rate[rate == -1.0] = np.nan
    status_conc = ints[:, 10]
    flags = ints[:, 11]
    warmup, rest = flags % 2, flags // 2
    err, rest = rest % len(kinds), rest // len(kinds)
    fin, worker = rest % len(reasons), rest // len(reasons)
    counts = ints[:, 5]
    start = chunk_us = None
    if blobs is not None:
        start = np.zeros(n + 1, _I64)
        np.cumsum(counts, out=start[1:])
        chunk_us = _chunk_offsets(ints[:, 2], ints[:, 3], counts, start, blobs, db, where, args)
    return RecordColumns(
        request_id=ints[:, 0],
        worker=worker,
        sent_s=t[:, 1].copy(),
        first_us=ints[:, 2],
        last_us=ints[:, 3],
        end_us=ints[:, 4],
        chunks=counts,
        chunk_token_sum=ints[:, 6],
        output_tokens=ints[:, 7],
        prompt_tokens=ints[:, 8],
        prompt_tokens_requested=ints[:, -1],
        step=ints[:, 12] if step is None else np.full(n, step, _I64),
        concurrency=status_conc // 2048 - 1,
        rate=rate,
        warmup=warmup.astype(bool),
        http_status=status_conc % 2048 - 1,
        error_code=err,
        finish_code=fin,
        error_kinds=kinds,
        finish_reasons=reasons,
        chunk_start=start,
        chunk_us=chunk_us,
    )


def _gap_bytes(db: sqlite3.Connection, where: str, args: list[Any]) -> bytes:
    """Every matching row's gap blob, one after another in rowid order, as one ``bytes``:
    SQLite concatenates them (3.6x faster than a Python object per row). An aggregate over a
    subquery with ``ORDER BY`` sees its rows in that order (SQLite never flattens such a
    subquery into an aggregate), and the total length is checked against the chunk counts."""
    try:
        (raw,) = db.execute(
            "SELECT CAST(group_concat(gaps_us, '') AS BLOB) FROM "
            f"(SELECT gaps_us FROM records{where} ORDER BY rowid)",
            args,
        ).fetchone()
    except (sqlite3.DataError, sqlite3.OperationalError):  # over SQLite's 1 GB value limit
        rows = db.execute(f"SELECT ifnull(gaps_us, X'') FROM records{where} ORDER BY rowid", args)
        return b"".join(itertools.chain.from_iterable(rows))
    return raw or b""


def _chunk_offsets(
    first_us: np.ndarray,
    last_us: np.ndarray,
    counts: np.ndarray,
    start: np.ndarray,
    raw: bytes,
    db: sqlite3.Connection,
    where: str,
    args: list[Any],
) -> np.ndarray:
    """Per-chunk offsets after send: each record's first offset, then its running gap sum."""
    n_gaps = int(np.maximum(counts - 1, 0).sum())
    if len(raw) == 4 * n_gaps:  # every blob int32 (an int64 one makes the total longer)
        gaps = np.frombuffer(raw, dtype="<i4").astype(_I64)
    else:  # a record with a gap over 35 minutes has an int64 blob: split row by row
        sizes = db.execute(
            f"SELECT ifnull(length(gaps_us), 0) FROM records{where} ORDER BY rowid", args
        )
        ends = np.cumsum([size for (size,) in sizes]).tolist()
        parts = [
            gaps_of(raw[e - size : e], k)
            for e, size, k in zip(ends, np.diff([0, *ends]).tolist(), counts.tolist(), strict=True)
        ]
        gaps = np.concatenate(parts) if parts else np.empty(0, _I64)
    return _running_offsets(first_us, last_us, counts, start, gaps)


def _running_offsets(
    first_us: np.ndarray,
    last_us: np.ndarray,
    counts: np.ndarray,
    start: np.ndarray,
    gaps: np.ndarray,
) -> np.ndarray:
    """One cumulative sum over [first, gaps…] of every record, each record's first value less
    the previous record's last offset, so the sum restarts at every record by itself; checked
    against each record's stored last offset (else the slower sum-and-subtract)."""
    total = int(start[-1])
    has = counts > 0
    heads, tails = start[:-1][has], start[1:][has] - 1
    values = np.empty(total, _I64)
    nonhead = np.ones(total, dtype=bool)
    nonhead[heads] = False
    values[nonhead] = gaps
    first, last = first_us[has], last_us[has]
    values[heads] = first - np.concatenate(([0], last[:-1]))
    np.cumsum(values, out=values)
    if np.array_equal(values[tails], last):
        return values
    values[heads] = first
    values[nonhead] = gaps
    running = np.cumsum(values)
    out: np.ndarray = running - np.repeat(running[heads] - first, counts[has])
    return out
