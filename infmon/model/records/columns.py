"""A columnar view of request records: one numpy array per field, for reports over millions.

A day at 50 requests/s is 4.3M records; a Python object per record costs seconds and hundreds
of MB before any statistic is computed. ``RecordColumns`` holds the same information as a list
of ``RequestRecord`` at the journal's precision (times as integer microseconds after ``sent_s``,
exactly what the journal stores), and computes TTFT, E2EL and TPOT with the very float
operations that decoding a journal record and reading its properties perform, so the step
statistics from columns equal those from the decoded records to the last bit
(``infmon.model.records.figures.summarize_columns``; a hypothesis test holds the two together).

Missing values: ``-1`` in the integer columns (no offset, unknown token count, no HTTP status,
no concurrency), ``nan`` in the float ones. Text columns (error kind, finish reason) are codes
into a small vocabulary tuple; code 0 is "none".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.records.server_timing import ServerColumns

US = 1_000_000
MISSING = -1
"""The integer columns' "none"."""

_I64 = np.int64


def _vocab_codes(values: Sequence[str | None]) -> tuple[np.ndarray, tuple[str | None, ...]]:
    vocab: dict[str | None, int] = {None: 0}
    codes = np.fromiter((vocab.setdefault(v, len(vocab)) for v in values), _I64, len(values))
    return codes, tuple(vocab)


def offsets_us(times_s: Sequence[float] | np.ndarray, sent_s: float) -> np.ndarray:
    """Chunk times as integer µs after ``sent_s``: the journal's rounding (IEEE, half-even)."""
    return np.rint((np.asarray(times_s, dtype=float) - sent_s) * US).astype(_I64)


@dataclass(frozen=True, eq=False)
class RecordColumns:
    """Per-record arrays (all of length ``len(self)``) plus the chunks of all records, flat."""

    request_id: np.ndarray
    worker: np.ndarray
    sent_s: np.ndarray
    """perf_counter seconds when each request was sent (float64)."""
    first_us: np.ndarray
    """First content chunk after sent, µs (``-1``: no chunk)."""
    last_us: np.ndarray
    """Last content chunk after sent, µs (``-1``: no chunk)."""
    end_us: np.ndarray
    """Stream end after sent, µs (``-1``: unknown)."""
    chunks: np.ndarray
    """Content chunks per record."""
    chunk_token_sum: np.ndarray
    """Sum of the per-chunk token counts (``-1``: not known per chunk)."""
    output_tokens: np.ndarray
    """The server's usage (``-1``: no usage, counted from chunks: flagged)."""
    prompt_tokens: np.ndarray
    prompt_tokens_requested: np.ndarray
    """The prompt length the workload asked for (``-1``: not sized)."""
    step: np.ndarray
    concurrency: np.ndarray
    rate: np.ndarray
    warmup: np.ndarray
    http_status: np.ndarray
    error_code: np.ndarray
    """Index into ``error_kinds`` (0: the request succeeded)."""
    finish_code: np.ndarray
    """Index into ``finish_reasons`` (0: none given)."""
    error_kinds: tuple[str | None, ...]
    finish_reasons: tuple[str | None, ...]
    chunk_start: np.ndarray | None
    """Record i's chunks are ``chunk_us[chunk_start[i]:chunk_start[i + 1]]`` (None: not loaded)."""
    chunk_us: np.ndarray | None
    """Every chunk's offset after its record's ``sent_s``, µs, records one after another."""
    server: ServerColumns | None = None
    """The server's own per-request figures and the task kinds (None: no record has any)."""

    def __len__(self) -> int:
        return int(self.sent_s.size)

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def from_records(cls, records: Sequence[RequestRecord]) -> RecordColumns:
        """Columns of ``records`` at the journal's precision (µs after each send time)."""
        n = len(records)
        sent = np.fromiter((r.sent_s for r in records), float, n)
        per = [offsets_us(r.chunk_times_s, r.sent_s) for r in records]
        counts = np.fromiter((a.size for a in per), _I64, n)
        start = np.zeros(n + 1, _I64)
        np.cumsum(counts, out=start[1:])
        flat = np.concatenate(per) if n else np.empty(0, _I64)
        end = np.fromiter((r.end_s for r in records), float, n)
        end_us = np.where(np.isnan(end), MISSING, np.rint((end - sent) * US)).astype(_I64)
        err, kinds = _vocab_codes([r.error_kind for r in records])
        fin, reasons = _vocab_codes([r.finish_reason for r in records])

        def ints(values: object) -> np.ndarray:
            return np.fromiter(
                (MISSING if v is None else v for v in values),  # type: ignore[attr-defined]
                _I64,
                n,
            )

        return cls(
            request_id=ints(r.request_id for r in records),
            worker=np.zeros(n, _I64),
            sent_s=sent,
            first_us=_ends(flat, start, counts, first=True),
            last_us=_ends(flat, start, counts, first=False),
            end_us=end_us,
            chunks=counts,
            chunk_token_sum=ints(sum(r.chunk_tokens) if r.chunk_tokens else None for r in records),
            output_tokens=ints(r.output_tokens for r in records),
            prompt_tokens=ints(r.prompt_tokens for r in records),
            prompt_tokens_requested=ints(r.prompt_tokens_requested for r in records),
            step=ints(r.step for r in records),
            concurrency=ints(r.concurrency for r in records),
            rate=np.fromiter((math.nan if r.rate is None else r.rate for r in records), float, n),
            warmup=np.fromiter((r.warmup for r in records), bool, n),
            http_status=ints(r.http_status for r in records),
            error_code=err,
            finish_code=fin,
            error_kinds=kinds,
            finish_reasons=reasons,
            chunk_start=start,
            chunk_us=flat,
            server=_server_of(records),
        )

    @classmethod
    def concat(cls, parts: Sequence[RecordColumns]) -> RecordColumns:
        """One set of columns from several (vocabularies merged, chunk offsets re-based)."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.from_records([])
        kinds = _merged_vocab([p.error_kinds for p in parts])
        reasons = _merged_vocab([p.finish_reasons for p in parts])
        kw: dict[str, object] = {
            name: np.concatenate([getattr(p, name) for p in parts]) for name in _PER_RECORD
        }
        kw["error_code"] = np.concatenate(
            [_recode(p.error_code, p.error_kinds, kinds) for p in parts]
        )
        kw["finish_code"] = np.concatenate(
            [_recode(p.finish_code, p.finish_reasons, reasons) for p in parts]
        )
        loaded = all(p.chunk_us is not None for p in parts)
        server = None
        if any(p.server is not None for p in parts):
            server = ServerColumns.concat(
                [p.server if p.server is not None else ServerColumns.empty(len(p)) for p in parts]
            )
        return cls(
            **kw,  # type: ignore[arg-type]
            error_kinds=kinds,
            finish_reasons=reasons,
            chunk_start=_concat_starts([p.chunk_start for p in parts]) if loaded else None,  # type: ignore[misc]
            chunk_us=np.concatenate([p.chunk_us for p in parts if p.chunk_us is not None])
            if loaded
            else None,
            server=server,
        )

    def take(self, index: np.ndarray, chunks: bool = True) -> RecordColumns:
        """The records at ``index`` (a boolean mask or integer positions), in that order;
        ``chunks=False`` leaves their chunk offsets behind (cheaper, when they are not read)."""
        if index.dtype == bool and index.all() and (chunks or self.chunk_us is None):
            return self
        idx = np.flatnonzero(index) if index.dtype == bool else np.asarray(index, _I64)
        kw: dict[str, object] = {name: getattr(self, name)[idx] for name in _PER_RECORD}
        kw["error_code"], kw["finish_code"] = self.error_code[idx], self.finish_code[idx]
        kw["error_kinds"], kw["finish_reasons"] = self.error_kinds, self.finish_reasons
        start = chunk = None
        if chunks and self.chunk_us is not None and self.chunk_start is not None:
            lo, counts = self.chunk_start[idx], self.chunks[idx]
            start = np.zeros(idx.size + 1, _I64)
            np.cumsum(counts, out=start[1:])
            chunk = self.chunk_us[_ranges(lo, counts)]
        server = self.server.take(idx) if self.server is not None else None
        return RecordColumns(**kw, chunk_start=start, chunk_us=chunk, server=server)  # type: ignore[arg-type]

    # ---- derived values: the same float operations as RequestRecord's properties ---------------

    def _at(self, offset_us: np.ndarray) -> np.ndarray:
        """Absolute perf_counter times, as a decoded record holds them (``sent + µs / 1e6``)."""
        return self.sent_s + offset_us / US

    @property
    def ok(self) -> np.ndarray:
        return np.asarray(self.error_code == 0)

    @property
    def cancelled(self) -> np.ndarray:
        return np.asarray(self.error_code == self._code(ErrorKind.CANCELLED))

    def _code(self, kind: str) -> int:
        return self.error_kinds.index(kind) if kind in self.error_kinds else -2

    @property
    def end_s(self) -> np.ndarray:
        return np.where(self.end_us == MISSING, np.nan, self._at(self.end_us))

    @property
    def ttft_s(self) -> np.ndarray:
        has = self.chunks > 0
        return np.where(has, self._at(self.first_us) - self.sent_s, np.nan)

    @property
    def e2el_s(self) -> np.ndarray:
        has = self.chunks > 0
        return np.where(has, self._at(self.last_us) - self.sent_s, np.nan)

    @property
    def last_chunk_s(self) -> np.ndarray:
        return np.where(self.chunks > 0, self._at(self.last_us), np.nan)

    @property
    def tokens_estimated(self) -> np.ndarray:
        return np.asarray(self.output_tokens == MISSING)

    @property
    def output_token_count(self) -> np.ndarray:
        """Usage when given, else the per-chunk token sum, else the number of chunks."""
        counted = np.where(self.chunk_token_sum != MISSING, self.chunk_token_sum, self.chunks)
        return np.where(self.output_tokens != MISSING, self.output_tokens, counted)

    @property
    def tpot_s(self) -> np.ndarray:
        n = self.output_token_count
        valid = (n > 1) & (self.chunks > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = (self.e2el_s - self.ttft_s) / (n - 1)
        return np.where(valid, tpot, np.nan)

    def chunk_times_s(self) -> np.ndarray:
        """Every chunk's absolute time (flat), as decoded records hold them."""
        if self.chunk_us is None:
            raise ValueError("chunk offsets were not loaded")
        return np.repeat(self.sent_s, self.chunks) + self.chunk_us / US

    def pooled_itl_s(self, select: np.ndarray | None = None) -> np.ndarray:
        """Every gap between successive chunks of one record, records one after another (of
        the records ``select`` marks, when given: as ``take(select).pooled_itl_s()``)."""
        flat = self.chunk_times_s()
        if flat.size < 2:
            return np.empty(0)
        gaps = np.diff(flat)
        if select is None:
            keep = np.ones(gaps.size, dtype=bool)
        else:  # a gap is kept when the chunk it ends belongs to a selected record
            keep = np.repeat(select, self.chunks)[1:]
        starts = np.cumsum(self.chunks)[:-1]
        keep[starts[(starts > 0) & (starts < flat.size)] - 1] = False
        return gaps[keep]

    def error_kind_at(self, codes: np.ndarray) -> list[str | None]:
        return [self.error_kinds[c] for c in codes.tolist()]


_PER_RECORD = tuple(
    f.name
    for f in fields(RecordColumns)
    if f.name
    not in (
        "error_code",
        "finish_code",
        "error_kinds",
        "finish_reasons",
        "chunk_start",
        "chunk_us",
        "server",
    )
)
"""The plain per-record arrays (the coded text columns and the chunks are handled apart)."""


def _server_of(records: Sequence[RequestRecord]) -> ServerColumns | None:
    if not any(r.server is not None or r.task is not None for r in records):
        return None
    return ServerColumns.of([r.server for r in records], [r.task for r in records])


def _ends(flat: np.ndarray, start: np.ndarray, counts: np.ndarray, first: bool) -> np.ndarray:
    has = counts > 0
    out = np.full(counts.size, MISSING, _I64)
    pos = start[:-1][has] if first else start[1:][has] - 1
    out[has] = flat[pos]
    return out


def _ranges(lo: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(a, a + n) for a, n in zip(lo, counts)])`` without the loop."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, _I64)
    starts = np.cumsum(counts) - counts
    return np.repeat(lo - starts, counts) + np.arange(total, dtype=_I64)


def _concat_starts(starts: Sequence[np.ndarray]) -> np.ndarray:
    out, base = [np.zeros(1, _I64)], 0
    for s in starts:
        out.append(s[1:] + base)
        base += int(s[-1])
    return np.concatenate(out)


def _merged_vocab(vocabs: Sequence[tuple[str | None, ...]]) -> tuple[str | None, ...]:
    merged: dict[str | None, None] = {None: None}
    for v in vocabs:
        merged.update(dict.fromkeys(v))
    return tuple(merged)


def _recode(
    codes: np.ndarray, old: tuple[str | None, ...], new: tuple[str | None, ...]
) -> np.ndarray:
    table = np.array([new.index(v) for v in old], _I64)
    return table[codes] if codes.size else codes.astype(_I64)
