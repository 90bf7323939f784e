"""The last resort of a journal whose disk still refuses it at the end of a run.

Rows held in memory would be lost when the process exits. Instead the session's record is
copied (SQLite's online backup, from the writer's own connections: what is committed, WAL
included) into this run's private directory (``safefile.private_dir``: ``$TMPDIR``, mode 0700,
usually another file system) and the held rows are committed there, so that directory holds
the whole session and its reports are built from it. Whatever cannot be written there either
is counted as lost, said at exit and makes the run's status non-zero.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

from infmon.journal.held import Held
from infmon.journal.safefile import private_dir
from infmon.journal.store import connect, shard_name


def rescue(
    session_dir: Path,
    dbs: dict[int, sqlite3.Connection],
    held: Held,
    commit: Callable[[Held, Callable[[int], sqlite3.Connection]], int],
) -> tuple[Path, int]:
    """Copy every shard in ``dbs`` to the private directory and ``commit`` the ``held`` rows
    there; returns (that directory, records written). Raises ``OSError`` or
    ``sqlite3.Error`` when that disk refuses too (the held rows are then left in ``held``)."""
    target = private_dir(Path(session_dir).resolve())
    copies: dict[int, sqlite3.Connection] = {}
    try:
        for worker in sorted(set(dbs) | set(held.records) | {0}):
            path = target / shard_name(worker)
            if worker in dbs:
                with contextlib.closing(sqlite3.connect(path)) as dst:
                    dbs[worker].backup(dst)
            copies[worker] = connect(path)

        def db(worker: int) -> sqlite3.Connection:
            if worker not in copies:
                copies[worker] = connect(target / shard_name(worker))
            return copies[worker]

        written = commit(held, db)
        for copy in copies.values():
            copy.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            copy.execute("PRAGMA journal_mode = DELETE")
    finally:
        for copy in copies.values():
            with contextlib.suppress(sqlite3.Error):
                copy.close()
    return target, written
