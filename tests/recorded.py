"""Sessions recorded by infmon and kept as fixtures (``tests/fixtures/sessions``, each with its
source note): a journal kept as ``NAME.journal.sqlite.xz`` unpacks into a session directory."""

from __future__ import annotations

import lzma
from pathlib import Path

SESSIONS = Path(__file__).parent / "fixtures" / "sessions"


def unpack_journal(name: str, session: Path) -> Path:
    """``SESSIONS/NAME.journal.sqlite.xz`` as the journal of a new session directory
    ``session``; returns ``session``."""
    session.mkdir()
    xz = SESSIONS / f"{name}.journal.sqlite.xz"
    (session / "journal.sqlite").write_bytes(lzma.decompress(xz.read_bytes()))
    return session
