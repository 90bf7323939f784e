"""`infmon export SESSION_DIR --csv|--jsonl`: a session's requests for tools without infmon.

One row per request, the columns of ``requests.csv`` (``docs/journal.md``); JSON lines add the
worker and every chunk's offset after the send time (µs). Rows are written a step at a time
(memory follows the largest step), filtered by ``--step`` and by send time (``--since``,
``--until``: seconds since the session started, or a wall-clock ``HH:MM[:SS]`` of its day).

Parquet is not written: the one library that writes it well (pyarrow) is ~40 MB, too heavy for
infmon's dependencies, and no light one exists; ``--parquet`` says how to convert the CSV with
DuckDB. The journal itself is SQLite: ``sqlite3 journal.sqlite 'SELECT … FROM requests'``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from infmon.commands import CliError
from infmon.journal.reader import SessionReader
from infmon.journal.safefile import atomic_open
from infmon.model.records.columns import MISSING, RecordColumns
from infmon.report.csvout import RequestsCsv

NO_PARQUET = (
    "Parquet is not written by infmon (pyarrow, the library for it, is too heavy a "
    "dependency): export --csv and convert it, e.g. "
    "duckdb -c \"COPY (FROM 'requests.csv') TO 'requests.parquet'\""
)


def iter_columns(
    reader: SessionReader,
    step: int | None = None,
    since_s: float | None = None,
    until_s: float | None = None,
) -> Iterator[RecordColumns]:
    """The session's records a step at a time, filtered (times on the perf_counter clock)."""
    steps = [step] if step is not None else reader.steps()
    if reader.legacy:
        for idx, cols in reader.iter_step_columns():
            if idx in steps:
                keep = np.ones(len(cols), dtype=bool)
                if since_s is not None:
                    keep &= cols.sent_s >= since_s
                if until_s is not None:
                    keep &= cols.sent_s < until_s
                yield cols.take(keep)
        return
    for idx in steps:
        yield reader.read_columns(step=idx, since_s=since_s, until_s=until_s)


def _value(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def _json_rows(cols: RecordColumns, origin_s: float) -> Iterator[dict[str, Any]]:
    ok, count = cols.ok, cols.output_token_count
    ttft, tpot, e2el = cols.ttft_s, cols.tpot_s, cols.e2el_s
    start, chunks = cols.chunk_start, cols.chunk_us
    for i in range(len(cols)):
        row = {
            "worker": int(cols.worker[i]),
            "request_id": int(cols.request_id[i]),
            "step": int(cols.step[i]),
            "concurrency": None if cols.concurrency[i] == MISSING else int(cols.concurrency[i]),
            "rate": _value(float(cols.rate[i])),
            "warmup": bool(cols.warmup[i]),
            "ok": bool(ok[i]),
            "error_kind": cols.error_kinds[int(cols.error_code[i])],
            "http_status": None if cols.http_status[i] == MISSING else int(cols.http_status[i]),
            "sent_s": round(float(cols.sent_s[i]) - origin_s, 6),
            "ttft_ms": _value(round(1e3 * float(ttft[i]), 3)),
            "tpot_ms": _value(round(1e3 * float(tpot[i]), 6)),
            "e2el_ms": _value(round(1e3 * float(e2el[i]), 3)),
            "output_tokens": int(count[i]) if ok[i] else None,
            "tokens_estimated": bool(cols.output_tokens[i] == MISSING),
            "prompt_tokens": None
            if cols.prompt_tokens[i] == MISSING
            else int(cols.prompt_tokens[i]),
            "chunks": int(cols.chunks[i]),
            "finish_reason": cols.finish_reasons[int(cols.finish_code[i])],
        }
        if start is not None and chunks is not None:
            row["chunk_offsets_us"] = chunks[start[i] : start[i + 1]].tolist()
        yield row


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_dir", type=Path, help="a session directory")
    fmt = parser.add_mutually_exclusive_group(required=True)
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv", help="CSV rows")
    fmt.add_argument("--jsonl", dest="fmt", action="store_const", const="jsonl", help="JSON lines")
    fmt.add_argument(
        "--parquet", dest="fmt", action="store_const", const="parquet", help="(see --help)"
    )
    parser.add_argument("--step", type=int, metavar="N", help="only step N")
    parser.add_argument(
        "--since", metavar="T", help="sent at or after T (s since start, HH:MM[:SS])"
    )
    parser.add_argument("--until", metavar="T", help="sent before T (s since start, HH:MM[:SS])")
    parser.add_argument("-o", "--out", type=Path, metavar="FILE", help="write here, not stdout")


def parse_time(text: str | None, origin_perf_s: float, origin_wall_s: float | None) -> float | None:
    """``T`` on the session's perf_counter clock: seconds since its start, or a wall-clock
    ``HH:MM[:SS]`` (local time) on the day it started."""
    if text is None:
        return None
    try:
        return origin_perf_s + float(text)
    except ValueError:
        pass
    if origin_wall_s is None:
        raise CliError(f"--since/--until {text!r}: this session has no wall-clock origin")
    parts = text.split(":")
    try:
        if not 2 <= len(parts) <= 3:
            raise ValueError(text)
        h, m, sec = (float(p) for p in [*parts, "0"][:3])
    except ValueError:
        raise CliError(
            f"--since/--until {text!r}: seconds since the start, or HH:MM[:SS]"
        ) from None
    day = time.localtime(origin_wall_s)
    midnight = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, 0, 0, 0, 0, 0, -1))
    wall = midnight + 3600 * h + 60 * m + sec
    return origin_perf_s + (wall - origin_wall_s)


def run(args: argparse.Namespace) -> int:
    from infmon.journal import JournalReadError, is_session_dir

    if args.fmt == "parquet":
        raise CliError(NO_PARQUET)
    if not is_session_dir(args.session_dir):
        raise CliError(f"{args.session_dir}: not a session directory")
    reader = SessionReader(args.session_dir)
    try:
        origin = reader.origin_s()
        wall = (reader.meta.get("clock_origin") or {}).get("wall_s")
        since = parse_time(args.since, origin, wall)
        until = parse_time(args.until, origin, wall)
        if args.out:
            with atomic_open(args.out, newline="") as out:
                rows = export(reader, args.fmt, out, args.step, since, until)
        else:
            rows = export(reader, args.fmt, sys.stdout, args.step, since, until)
    except JournalReadError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"export not written: {exc.strerror or exc}") from None
    print(f"infmon: exported {rows:,} requests", file=sys.stderr)
    return 0


def export(
    reader: SessionReader,
    fmt: str,
    out: IO[str],
    step: int | None = None,
    since_s: float | None = None,
    until_s: float | None = None,
) -> int:
    """Write the filtered requests as ``csv`` or ``jsonl``; returns how many rows."""
    origin = reader.origin_s()
    rows = 0
    csv_out = RequestsCsv(out, origin) if fmt == "csv" else None
    for cols in iter_columns(reader, step, since_s, until_s):
        if csv_out is not None:
            csv_out.add_columns(cols)
        else:
            out.writelines(
                json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n"
                for row in _json_rows(cols, origin)
            )
        rows += len(cols)
    return rows
