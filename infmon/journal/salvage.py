"""What can still be read from a damaged journal (a bit flip, a torn copy, a 0-byte file).

Each table of each shard is read in rowid order; where SQLite reports the file malformed, the
read skips ahead (1, 2, 4 … rowids) past the damaged pages and goes on. The rows read are
written to a fresh session directory of the same schema, private to this process
(``safefile.private_dir``), so every reader and report works on them unchanged.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infmon.journal.safefile import private_dir
from infmon.journal.store import connect, shard_paths

TABLES = ("meta", "records", "events", "scrapes", "scrape_pages")
_MAX_ROWID = 1 << 62


@dataclass(frozen=True)
class Salvage:
    """A salvaged copy: where it is and how many rows of each table it holds."""

    directory: Path
    rows: dict[str, int]

    def line(self) -> str:
        parts = [f"{self.rows.get(t, 0):,} {t.replace('_', ' ')}" for t in TABLES[1:4]]
        return f"salvaged {', '.join(parts)} into {self.directory}"

    @property
    def empty(self) -> bool:
        return not (self.rows.get("records") or self.rows.get("meta"))


def salvage(session_dir: Path) -> Salvage:
    """Copy every readable row of the session's shards into a private directory."""
    out = private_dir(Path(session_dir).resolve().with_name(Path(session_dir).name + "-salvaged"))
    counts: dict[str, int] = {}
    for path in shard_paths(session_dir):
        dst = connect(out / path.name)
        try:
            with contextlib.closing(_open(path)) as src:
                for table in TABLES:
                    counts[table] = counts.get(table, 0) + _copy(src, dst, table)
            dst.execute("PRAGMA journal_mode = DELETE")
        finally:
            dst.close()
    return Salvage(out, counts)


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _copy(src: sqlite3.Connection, dst: sqlite3.Connection, table: str) -> int:
    try:
        have = [r[1] for r in src.execute(f"PRAGMA table_info({table})")]
    except sqlite3.DatabaseError:
        return 0
    want = {r[1] for r in dst.execute(f"PRAGMA table_info({table})")}
    cols = [c for c in have if c in want]
    if not cols:
        return 0
    insert = (
        f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    )
    n = 0
    dst.execute("BEGIN")
    for row in _readable_rows(src, table, cols):
        dst.execute(insert, row)
        n += 1
    dst.execute("COMMIT")
    return n


def _readable_rows(
    src: sqlite3.Connection, table: str, cols: list[str]
) -> Iterator[tuple[object, ...]]:
    """The rows SQLite can read, in rowid order, skipping ahead past damaged pages."""
    select = f"SELECT rowid, {', '.join(cols)} FROM {table} WHERE rowid > ? ORDER BY rowid"
    last, step = -1, 1
    while last < _MAX_ROWID:
        try:
            for row in src.execute(select, (last,)):
                last, step = row[0], 1
                yield row[1:]
            return
        except sqlite3.DatabaseError:
            last, step = last + step, step * 2
