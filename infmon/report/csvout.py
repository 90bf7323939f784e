"""``requests.csv``: one row per request, written a step of columns at a time.

A day's session is millions of rows, so no Python object is made per row beyond its strings:
numbers are formatted through lookup tables of their digits (object arrays indexed by numpy),
text through the column's small vocabulary (escaped once per distinct value), and a row is one
``",".join``. Times are rounded to the nearest µs (send time) or ns (latencies in ms).

Text a server chose (``finish_reason``) may be a spreadsheet formula: a cell that begins with
``= + - @``, a tab or a carriage return is prefixed with ``'`` so a spreadsheet shows it as text.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import IO

import numpy as np

from infmon.model.records.columns import MISSING, RecordColumns

HEADER = (
    "request_id",
    "step",
    "concurrency",
    "rate",
    "warmup",
    "ok",
    "error_kind",
    "http_status",
    "sent_s",
    "ttft_ms",
    "tpot_ms",
    "itl_ms_mean",
    "e2el_ms",
    "output_tokens",
    "tokens_estimated",
    "prompt_tokens",
    "chunks",
    "finish_reason",
)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_TABLE = 10_000
_DIGITS = np.array([str(i) for i in range(_TABLE)], dtype=object)


def safe_cell(text: str) -> str:
    """``text`` as a CSV cell that a spreadsheet cannot run (formula prefix) and that parses
    back as one field (quoted when it holds a comma, quote or line break)."""
    if text.startswith(FORMULA_START):
        text = "'" + text
    buf = io.StringIO()
    csv.writer(buf).writerow([text])  # quoted when it holds , " \r or \n
    return buf.getvalue()[:-2]


def _ints(values: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
    """Decimal strings of non-negative integers ("" where ``missing``), as an object array."""
    v = np.asarray(values, dtype=np.int64)
    if v.size and int(v.min()) >= 0 and int(v.max()) < _TABLE:
        out = _DIGITS[v]
    else:
        out = np.array(list(map(str, v.tolist())), dtype=object)
    if missing is not None and missing.any():
        out = out.copy()
        out[missing] = ""
    return out


_THREE = np.array([f"{i:03d}" for i in range(1000)], dtype=object)
_WHOLE_DOT = np.array([f"{i}." for i in range(_TABLE)], dtype=object)


def _whole_dot(whole: np.ndarray) -> np.ndarray:
    """``f"{w}."`` for each non-negative integer (one lookup when below ``_TABLE``)."""
    if whole.size and int(whole.max()) < _TABLE:
        text: np.ndarray = _WHOLE_DOT[whole]
        return text
    return _ints(whole) + "."


def _fixed(units: np.ndarray, decimals: int, missing: np.ndarray) -> np.ndarray:
    """``units / 10**decimals`` as fixed-point text, ``decimals`` 3 or 6 ("" where missing)."""
    u = np.where(missing, 0, units).astype(np.int64)
    neg = u < 0
    whole, frac = np.divmod(np.abs(u), 10**decimals)
    text: np.ndarray
    if decimals == 3:
        text = _whole_dot(whole) + _THREE[frac]
    else:
        hi, lo = np.divmod(frac, 1000)
        text = _whole_dot(whole) + (_THREE[hi] + _THREE[lo])
    if neg.any():
        text[neg] = "-" + text[neg]
    text[missing] = ""
    return text


def _ms(seconds: np.ndarray) -> np.ndarray:
    """Milliseconds with 3 decimals (to the ns), "" for nan."""
    missing = np.isnan(seconds)
    return _fixed(np.rint(np.where(missing, 0.0, seconds) * 1e6), 3, missing)


def _text(codes: np.ndarray, vocab: Sequence[str | None]) -> np.ndarray:
    table = np.array(["" if v is None else safe_cell(v) for v in vocab], dtype=object)
    text: np.ndarray = table[codes]
    return text


def _itl_mean_s(cols: RecordColumns) -> np.ndarray:
    n = cols.chunks
    span = np.where(n > 0, cols._at(cols.last_us) - cols._at(cols.first_us), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 1, span / (n - 1), np.nan)


class RequestsCsv:
    """Writes rows to an open text file; times relative to the session's clock origin."""

    def __init__(self, f: IO[str], origin_s: float) -> None:
        self.f = f
        self.f.write(",".join(HEADER) + "\r\n")
        self.origin_s = origin_s

    def add_columns(self, cols: RecordColumns) -> None:
        if not len(cols):
            return
        ok = cols.ok
        rate_missing = np.isnan(cols.rate)
        rates = np.unique(cols.rate[~rate_missing])
        rate_text = np.full(len(cols), "", dtype=object)
        if rates.size:
            table = np.array([repr(x) for x in rates.tolist()], dtype=object)
            rate_text[~rate_missing] = table[np.searchsorted(rates, cols.rate[~rate_missing])]
        sent_us = np.rint((cols.sent_s - self.origin_s) * 1e6)
        columns = (
            _ints(cols.request_id),
            _ints(cols.step),
            _ints(cols.concurrency, cols.concurrency == MISSING),
            rate_text,
            _DIGITS[cols.warmup.astype(np.int64)],
            _DIGITS[ok.astype(np.int64)],
            _text(cols.error_code, cols.error_kinds),
            _ints(cols.http_status, cols.http_status == MISSING),
            _fixed(sent_us, 6, np.zeros(len(cols), dtype=bool)),
            _ms(cols.ttft_s),
            _ms(cols.tpot_s),
            _ms(_itl_mean_s(cols)),
            _ms(cols.e2el_s),
            _ints(np.where(ok, cols.output_token_count, 0), ~ok),
            _DIGITS[cols.tokens_estimated.astype(np.int64)],
            _ints(cols.prompt_tokens, cols.prompt_tokens == MISSING),
            _ints(cols.chunks),
            _text(cols.finish_code, cols.finish_reasons),
        )
        lines = map(",".join, zip(*(c.tolist() for c in columns), strict=True))
        self.f.write("\r\n".join(lines) + "\r\n")
