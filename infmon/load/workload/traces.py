"""Arrival traces people publish, read into one shape: when each request came, how long
its prompt and its answer were, and (Mooncake) which prompt blocks it shares with others.

- Mooncake JSONL: ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids``
  (one id per block of ``MOONCAKE_BLOCK_TOKENS`` prompt tokens; equal ids are equal blocks).
- Azure LLM inference trace CSV: ``TIMESTAMP`` (date and time), ``ContextTokens``,
  ``GeneratedTokens``.
- BurstGPT CSV: ``Timestamp`` (s), ``Request tokens``, ``Response tokens`` (rows with zero
  response tokens, failures in the original log, are skipped).

Times become seconds after the first arrival, sorted. Files are bounded in size and rows.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from infmon.model.base.sanitize import loads_json
from infmon.model.shape.files import read_error

MOONCAKE_BLOCK_TOKENS = 512
MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_TRACE_ROWS = 2_000_000


class TraceError(ValueError):
    """A trace that cannot be used; the message is one line naming the file (and row)."""


@dataclass(frozen=True, slots=True)
class TraceEntry:
    at_s: float
    """Seconds after the trace's first arrival."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    """Mooncake: the prompt's blocks; a shared id is a shared prefix block."""


@dataclass(frozen=True, slots=True)
class Trace:
    name: str
    """The file's name (reports name the trace)."""
    format: str
    """"mooncake", "azure" or "burstgpt"."""
    entries: tuple[TraceEntry, ...]
    block_tokens: int = MOONCAKE_BLOCK_TOKENS

    @property
    def span_s(self) -> float:
        return self.entries[-1].at_s if self.entries else 0.0


def read_trace(path_text: str, limit: int | None = None) -> Trace:
    """Read a trace file, its format told by its content (first ``limit`` rows if given)."""
    path = Path(path_text).expanduser()
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"trace {path} is larger than {MAX_TRACE_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(f"cannot read trace {path}: {read_error(exc)}") from None
    return parse_trace(text, path.name, limit)


def parse_trace(text: str, name: str, limit: int | None = None) -> Trace:
    head = text.lstrip()[:1]
    if head == "{":
        fmt, rows = "mooncake", _mooncake(text, name, limit)
    else:
        fmt, rows = _csv(text, name, limit)
    if not rows:
        raise TraceError(f"{name}: no requests found")
    rows.sort(key=lambda e: e.at_s)
    t0 = rows[0].at_s
    entries = tuple(
        TraceEntry(e.at_s - t0, e.input_tokens, e.output_tokens, e.hash_ids) for e in rows
    )
    return Trace(name, fmt, entries)


def _positive(value: object, where: str, field: str) -> int:
    try:
        n = int(float(str(value)))
    except (TypeError, ValueError):
        raise TraceError(f"{where}: {field} is not a number: {str(value)[:40]!r}") from None
    if n < 0:
        raise TraceError(f"{where}: {field} is negative")
    return n


def _mooncake(text: str, name: str, limit: int | None) -> list[TraceEntry]:
    rows: list[TraceEntry] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(rows) >= (limit or MAX_TRACE_ROWS):
            break
        where = f"{name}:{lineno}"
        try:
            obj = loads_json(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict) or "timestamp" not in obj:
            raise TraceError(f"{where}: expected an object with timestamp, input_length, ...")
        ids = obj.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise TraceError(f"{where}: hash_ids must be a list of integers")
        rows.append(
            TraceEntry(
                _positive(obj["timestamp"], where, "timestamp") / 1000.0,
                max(1, _positive(obj.get("input_length"), where, "input_length")),
                max(1, _positive(obj.get("output_length"), where, "output_length")),
                tuple(ids),
            )
        )
    return rows


_AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURST = ("Timestamp", "Request tokens", "Response tokens")


def _csv(text: str, name: str, limit: int | None) -> tuple[str, list[TraceEntry]]:
    reader = csv.DictReader(io.StringIO(text))
    columns = set(reader.fieldnames or ())
    if set(_AZURE) <= columns:
        fmt, (t_col, in_col, out_col) = "azure", _AZURE
    elif set(_BURST) <= columns:
        fmt, (t_col, in_col, out_col) = "burstgpt", _BURST
    else:
        raise TraceError(
            f"{name}: not a known trace (Mooncake JSONL, Azure CSV with {', '.join(_AZURE)}, "
            f"or BurstGPT CSV with {', '.join(_BURST)})"
        )
    rows: list[TraceEntry] = []
    for n, row in enumerate(reader, start=2):
        if len(rows) >= (limit or MAX_TRACE_ROWS):
            break
        where = f"{name}:{n}"
        out = _positive(row.get(out_col), where, out_col)
        if out == 0 and fmt == "burstgpt":
            continue
        t_s = _azure_time(row.get(t_col), where) if fmt == "azure" else _seconds(row, t_col, where)
        rows.append(TraceEntry(t_s, max(1, _positive(row.get(in_col), where, in_col)), max(1, out)))
    return fmt, rows


def _seconds(row: dict[str, str], col: str, where: str) -> float:
    try:
        return float(row.get(col) or "")
    except ValueError:
        raise TraceError(f"{where}: {col} is not a number of seconds") from None


def _azure_time(value: str | None, where: str) -> float:
    """``2023-11-16 18:15:46.6805900`` (7 fractional digits) → POSIX seconds."""
    text = (value or "").strip()
    main, dot, frac = text.partition(".")
    try:
        t = datetime.fromisoformat(main).timestamp()
        return t + (float("0." + frac) if dot and frac.isdigit() else 0.0)
    except ValueError:
        raise TraceError(f"{where}: TIMESTAMP is not a date and time: {text[:40]!r}") from None
