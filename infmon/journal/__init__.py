"""The append-only session record (``JournalWriter``) and its streaming reader."""

from infmon.journal.reader import SessionReader, is_session_dir
from infmon.journal.writer import JournalWriter

__all__ = ["JournalWriter", "SessionReader", "is_session_dir"]
