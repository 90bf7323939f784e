"""The last resort of a journal whose disk still refuses it at the end of a run.

Rows held in memory would be lost when the process exits. Instead the session's record is
copied (its files, WAL included) into this run's private directory (``safefile.private_dir``: ``$TMPDIR``, mode 0700,
usually another file system) and the held rows are committed there, so that directory holds
the whole session and its reports are built from it. Whatever cannot be written there either
is counted as lost, said at exit and makes the run's status non-zero.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from infmon.journal.held import Held
from infmon.journal.safefile import private_dir
from infmon.journal.store import connect, shard_name


def rescue(
    session_dir: Path,
    shards: list[int],
    held: Held,
    commit: Callable[[Held, Callable[[int], sqlite3.Connection]], int],
) -> tuple[Path, int]:
    """Copy the session's ``shards`` to the private directory and ``commit`` the ``held`` rows
    there; returns (that directory, records written). Raises ``OSError`` or
    ``sqlite3.Error`` when that disk refuses too (the held rows are then left in ``held``).

    The files are copied with plain reads (the database and its WAL, between commits: a
    consistent pair; SQLite rebuilds the WAL index of the copy), never through the session's
    own connections: a read through them touches the mapped ``-shm`` file, and a file made
    immutable under a running process turns that touch into SIGBUS."""
    target = private_dir(Path(session_dir).resolve())
    copies: dict[int, sqlite3.Connection] = {}
    try:
        for worker in shards:
            src = Path(session_dir) / shard_name(worker)
            for suffix in ("", "-wal"):
                if Path(f"{src}{suffix}").exists():
                    shutil.copyfile(f"{src}{suffix}", target / f"{src.name}{suffix}")

        def db(worker: int) -> sqlite3.Connection:
            if worker not in copies:
                copies[worker] = connect(target / shard_name(worker))
            return copies[worker]

        for worker in shards:
            db(worker)
        written = commit(held, db)
        for copy in copies.values():
            copy.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            copy.execute("PRAGMA journal_mode = DELETE")
    finally:
        for copy in copies.values():
            with contextlib.suppress(sqlite3.Error):
                copy.close()
    return target, written
