"""`infmon report SESSION_DIR`: rebuild every report of a session, offline.

The journal's format is detected (SQLite ``journal.sqlite``, or the JSON lines of sessions
recorded before it). Reports go to ``--out``, else into the session directory, else (a full or
read-only disk) to a fallback directory; the files written are printed, so the place is seen.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infmon.commands import CliError


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
    from infmon.journal import JournalReadError, SessionDirError, is_session_dir
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
    try:
        written = write_reports(args.session_dir, args.out)
    except JournalReadError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"reports not written: {exc.strerror or exc}") from None
    for path in written:
        print(path)
    return 0
