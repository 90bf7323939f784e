"""`infmon report SESSION_DIR`: rebuild every report of a session, offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from infmon.cli import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_dir", type=Path, help="a session directory (records.jsonl …)")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write the reports here instead of into the session directory",
    )


def run(args: argparse.Namespace) -> int:
    from infmon.journal import is_session_dir
    from infmon.report import write_reports

    if not is_session_dir(args.session_dir):
        raise CliError(f"{args.session_dir}: not a session directory (no records.jsonl)")
    for path in write_reports(args.session_dir, args.out):
        print(path)
    return 0
