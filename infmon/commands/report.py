"""`infmon report SESSION_DIR`: rebuild every report of a session, offline.

The journal's format is detected (SQLite ``journal.sqlite``, or the JSON lines of sessions
recorded before it). Reports go to ``--out``, else into the session directory, else (a full or
read-only disk) to a fallback directory; the files written are printed, so the place is seen.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from infmon.commands import CliError
from infmon.journal import JournalReadError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session_dir", type=Path, help="a session directory (journal.sqlite, or records.jsonl)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the reports here instead of into the session directory",
    )


def run(args: argparse.Namespace) -> int:
    from infmon.journal import SessionDirError, is_session_dir
    from infmon.report import write_reports

    if not is_session_dir(args.session_dir):
        raise CliError(
            f"{args.session_dir}: not a session directory (no journal.sqlite or records.jsonl)"
        )
    if args.out is not None:
        from infmon.journal import check_session_dir

        try:
            check_session_dir(args.out)
        except SessionDirError as exc:
            raise CliError(str(exc)) from None
    status = 0
    try:
        written = write_reports(args.session_dir, args.out)
    except (JournalReadError, sqlite3.DatabaseError) as exc:
        written, status = _from_salvage(args.session_dir, args.out, exc), 1
    except OSError as exc:
        raise CliError(f"reports not written: {exc.strerror or exc}") from None
    for path in written:
        print(path)
    return status


def _from_salvage(session_dir: Path, out: Path | None, exc: Exception) -> list[Path]:
    """A damaged journal: the reports of what can still be read (``journal.salvage``)."""
    from infmon.journal.salvage import salvage
    from infmon.report import write_reports

    why = str(exc).rsplit("(", 1)[-1].rstrip(")") if isinstance(exc, JournalReadError) else exc
    head = f"{session_dir}: the journal is damaged ({why})"
    try:
        saved = salvage(session_dir)
    except (sqlite3.Error, OSError) as err:
        raise CliError(f"{head}; nothing could be salvaged ({err})") from None
    if saved.empty:
        raise CliError(f"{head}; no record or configuration could be read from it")
    print(f"infmon: warning: {head}; {saved.line()}", file=sys.stderr)
    try:
        return write_reports(saved.directory, out)
    except (JournalReadError, sqlite3.Error, ValueError, KeyError) as err:
        raise CliError(f"{head}; {saved.line()}, but no report could be built ({err})") from None
