"""Command line: ``infmon URL`` opens the monitor; subcommands do the rest.

Each subcommand lives in ``infmon.commands.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``; this module only dispatches, so commands never collide here.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sqlite3
import sys
from collections.abc import Sequence

from infmon import __version__
from infmon.commands import CliError

COMMANDS: dict[str, str] = {
    "demo": "start the built-in vLLM simulator and open the monitor on it",
    "monitor": "open the live monitor against a server (also: infmon URL)",
    "bench": "run load steps against a server and print a table (and --json)",
    "sim": "run the vLLM simulator (OpenAI API + /metrics)",
    "scrape": "one canonical snapshot of a server's Prometheus metrics",
    "report": "rebuild every report of a session directory",
    "compare": "compare runs (session directories or report.json files)",
    "export": "a session's requests as CSV or JSON lines (--step, --since, --until)",
    "quality": "run output-quality probes against a server",
    "method": "the A/B method: sweep + quality as a baseline, change one thing, rerun, compare",
    "serve": "the monitor in a browser (textual-serve on localhost)",
    "replay": "open a recorded session with a time cursor (←/→, [/], space)",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, the options of that one command alone (the
    others are listed, not imported: ``infmon sim`` starts in 0.2 s, not 1.7)."""
    parser = argparse.ArgumentParser(
        prog="infmon",
        description="Drive streaming load against an LLM inference server and watch its metrics.",
        epilog="`infmon URL` is short for `infmon monitor URL`.",
    )
    parser.add_argument("--version", action="version", version=f"infmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            module = importlib.import_module(f"infmon.commands.{name}")
            module.add_arguments(p)
            p.set_defaults(_run=module.run, _parser=p)
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """Turn ``infmon URL …`` (and ``infmon --concurrency 4 URL``: options first) into
    ``infmon monitor …``. Only the first word can name a command: an option's value may be
    a command's name (``--label demo``)."""
    if not argv or argv[0] in COMMANDS or argv[0] in ("-h", "--help", "--version"):
        return argv
    return ["monitor", *argv]


def _unknown(parser: argparse.ArgumentParser, unknown: list[str]) -> None:
    """Exit with ``parser``'s usage, naming the option a typo was probably meant to be."""
    import difflib

    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    hints = [
        m[0]
        for u in unknown
        if u.startswith("--") and (m := difflib.get_close_matches(u.split("=")[0], known, 1, 0.75))
    ]
    hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
    parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


def main(argv: Sequence[str] | None = None) -> int:
    code = _main(argv)
    writer = sys.modules.get("infmon.journal.writer")
    if writer is not None and writer.ABANDONED:  # see ABANDONED: no SQLite close, no SIGBUS
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None) -> int:
    args_list = _normalise(list(sys.argv[1:] if argv is None else argv))
    command = args_list[0] if args_list and args_list[0] in COMMANDS else ""
    parser = build_parser(command)  # "": no command named, only the list of them
    args, unknown = parser.parse_known_args(args_list)
    if unknown:  # the subcommand's own usage, not the top-level one
        _unknown(getattr(args, "_parser", None) or parser, unknown)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except CliError as exc:
        from infmon.model.base.sanitize import clean, redact_url  # the message may quote a server

        print(f"infmon: error: {clean(redact_url(str(exc)), 2000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("infmon: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `infmon … | head`: the reader left; no traceback, quiet exit
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except sqlite3.DatabaseError as exc:  # a damaged session journal, read by any command
        print(
            f"infmon: error: a session journal is damaged or not a journal ({exc}); "
            "`infmon report SESSION_DIR` salvages what can still be read",
            file=sys.stderr,
        )
        return 2
