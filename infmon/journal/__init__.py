"""The append-only session record (``JournalWriter``, SQLite) and its reader (SQLite or the
older JSON lines), with the session directory's check and lock (``store``)."""

from infmon.journal.reader import JournalReadError, SessionReader, is_session_dir
from infmon.journal.store import SessionDirError, check_session_dir
from infmon.journal.writer import JournalStatus, JournalWriter

__all__ = [
    "JournalReadError",
    "JournalStatus",
    "JournalWriter",
    "SessionDirError",
    "SessionReader",
    "check_session_dir",
    "is_session_dir",
]
