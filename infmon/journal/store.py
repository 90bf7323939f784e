"""The session directory on disk: its SQLite files, its lock, and the check every command makes.

A session is ``journal.sqlite`` (config, events, scrapes and worker 0's records) plus one
``journal.wN.sqlite`` per further load worker (records only), all in WAL mode; the schema is in
``docs/journal.md``. Older sessions are JSON lines (``records.jsonl`` …) and are still read.

``check_session_dir`` is what a command calls before it sends any load: it creates the directory
and proves it can write there, or raises ``SessionDirError`` with a one-line message.
``SessionLock`` keeps a second process out of a directory in use: an advisory ``flock`` on
``infmon.lock``, which holds the owner's pid; the kernel drops the lock when its owner dies, so a
stale lock left by a killed process is simply taken over.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import sqlite3
from pathlib import Path

from infmon.journal.rows import RECORD_SCHEMA
from infmon.journal.safefile import owned_by_other

MAIN_DB = "journal.sqlite"
LOCK_FILE = "infmon.lock"
SCHEMA = "infmon.session/2"
LEGACY_RECORDS = "records.jsonl"
_SHARD_RE = re.compile(r"^journal\.w(\d+)\.sqlite$")

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    {RECORDS}
);
CREATE INDEX IF NOT EXISTS records_step ON records (step);
CREATE INDEX IF NOT EXISTS records_sent ON records (sent_s);
CREATE TABLE IF NOT EXISTS events (t REAL NOT NULL, kind TEXT NOT NULL, event TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS scrapes (t REAL NOT NULL, keyframe INTEGER NOT NULL, snap TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS scrapes_t ON scrapes (t);
CREATE TABLE IF NOT EXISTS scrape_pages (t REAL NOT NULL, truncated INTEGER NOT NULL, page TEXT NOT NULL);
CREATE VIEW IF NOT EXISTS requests AS
SELECT worker, request_id, step, warmup, sent_s,
       error_kind IS NULL AS ok, error_kind, http_status, finish_reason,
       first_us / 1000.0 AS ttft_ms,
       last_us / 1000.0 AS e2el_ms,
       CASE WHEN chunks > 0 AND coalesce(output_tokens, chunk_token_sum, chunks) > 1
            THEN (last_us - first_us) / 1000.0
                 / (coalesce(output_tokens, chunk_token_sum, chunks) - 1) END AS tpot_ms,
       coalesce(output_tokens, chunk_token_sum, chunks) AS output_token_count,
       output_tokens IS NULL AS tokens_estimated,
       prompt_tokens, chunks, concurrency, rate
FROM records;
"""
DDL = _DDL.replace("{RECORDS}", ",\n    ".join(f"{n} {t}" for n, t in RECORD_SCHEMA))


class SessionDirError(OSError):
    """The session directory cannot be used (unwritable, read-only, in use): one line."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(errno.EACCES, reason, str(path))
        self.path, self.reason = Path(path), reason

    def __str__(self) -> str:
        return f"session directory {self.path}: {self.reason}"


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    return exc.strerror or str(exc)


def check_session_dir(path: Path) -> Path:
    """Create ``path`` if needed and prove a file can be written and removed there; a directory
    another user owns is refused (they could plant links to files of ours in it)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        other = owned_by_other(path)
        if other is not None:
            raise SessionDirError(
                path, f"owned by another user (uid {other}); infmon writes only where you own"
            )
        probe = path / f".infmon-write-test-{os.getpid()}"
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
        probe.unlink()
    except SessionDirError:
        raise
    except OSError as exc:
        raise SessionDirError(path, f"not writable ({_reason(exc)})") from None
    return path


class SessionLock:
    """An advisory lock on a session directory, held for the life of the object."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path) / LOCK_FILE
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise SessionDirError(path, f"cannot create its lock ({_reason(exc)})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            os.close(fd)
            raise SessionDirError(
                path, f"in use by pid {owner} (another infmon is recording there)"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def shard_name(worker: int) -> str:
    return MAIN_DB if worker == 0 else f"journal.w{worker}.sqlite"


def shard_paths(session_dir: Path) -> list[Path]:
    """The session's SQLite files, worker 0's first."""
    d = Path(session_dir)
    shards = sorted(
        (int(m.group(1)), p)
        for p in (d.iterdir() if d.is_dir() else ())
        if (m := _SHARD_RE.match(p.name))
    )
    main = [d / MAIN_DB] if (d / MAIN_DB).exists() else []
    return main + [p for _, p in shards]


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection to one journal file; a writer's is in WAL mode with the schema made."""
    if readonly:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        db.execute("PRAGMA query_only = 1")
        return db
    for suffix in ("", "-wal", "-shm", "-journal"):  # SQLite would write through a link
        if os.path.islink(f"{path}{suffix}"):
            raise sqlite3.OperationalError(f"{path}{suffix} is a symbolic link; not written")
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.executescript(DDL)
    have = record_columns(db)
    for name, decl in RECORD_SCHEMA:  # a journal from before a column was added
        if name not in have:
            db.execute(f"ALTER TABLE records ADD COLUMN {name} {decl}")
    return db


def record_columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(records)")}


def select_records(db: sqlite3.Connection) -> str:
    """``RECORD_SCHEMA``'s columns as a select list, NULL for any this journal lacks."""
    have = record_columns(db)
    return ", ".join(n if n in have else f"NULL AS {n}" for n, _ in RECORD_SCHEMA)
