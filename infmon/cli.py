"""Command line: ``infmon URL`` opens the monitor; subcommands do the rest.

Each subcommand lives in ``infmon.commands.<name>`` with ``add_arguments(parser)`` and
``run(args) -> int``; this module only dispatches, so commands never collide here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from infmon import __version__

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
    "serve": "the monitor in a browser (textual-serve on localhost)",
    "replay": "open a recorded session with a time cursor (←/→, [/], space)",
}


class CliError(Exception):
    """A clear, one-line error for the operator; printed without a traceback, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infmon",
        description="Drive streaming load against an LLM inference server and watch its metrics.",
        epilog="`infmon URL` is short for `infmon monitor URL`.",
    )
    parser.add_argument("--version", action="version", version=f"infmon {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"infmon.commands.{name}")
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _normalise(argv: list[str]) -> list[str]:
    """Turn ``infmon URL …`` into ``infmon monitor URL …``."""
    for i, arg in enumerate(argv):
        if arg.startswith("-"):
            if arg in ("-h", "--help", "--version"):
                return argv
            continue
        if arg not in COMMANDS:
            return [*argv[:i], "monitor", *argv[i:]]
        return argv
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(_normalise(args_list))
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except CliError as exc:
        from infmon.model.sanitize import clean  # the message may quote a server

        print(f"infmon: error: {clean(str(exc), 2000)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("infmon: interrupted", file=sys.stderr)
        return 130
