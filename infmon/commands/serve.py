"""`infmon serve [--listen HOST:PORT] TARGET…`: the monitor in a browser.

textual-serve answers HTTP on ``HOST:PORT`` (loopback by default) and, for each browser that
opens the page, runs ``infmon TARGET…`` (``infmon URL [options]`` or ``infmon demo``) under
Textual's web driver: the same app, keys and panes as in a terminal. Each page is its own
monitor process, with its own session directory and report.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from infmon.commands import CliError

DEFAULT_LISTEN = "127.0.0.1:8080"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where the web server listens (default {DEFAULT_LISTEN}: this machine only)",
    )
    parser.add_argument(
        "target",
        nargs=argparse.REMAINDER,
        metavar="URL|demo …",
        help="what each page runs: a server URL and monitor options, or `demo [options]`",
    )


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen wants HOST:PORT (e.g. {DEFAULT_LISTEN}), not {text!r}")
    return host.strip("[]"), int(port)


def command_for(target: list[str]) -> str:
    """The shell command textual-serve runs for each page (``infmon`` of this interpreter)."""
    if not target:
        raise CliError("serve what? give a server URL (or `demo`), e.g. infmon serve demo")
    return shlex.join([sys.executable, "-m", "infmon", *target])


def run(args: argparse.Namespace) -> int:
    host, port = parse_listen(args.listen)
    command = command_for(list(args.target))
    try:
        from infmon.ui.web import serve
    except ImportError:
        raise CliError("`infmon serve` needs textual-serve (pip install textual-serve)") from None
    print(f"infmon: serving the monitor on http://{host}:{port} (Ctrl+C stops)", file=sys.stderr)
    serve(command, host, port)
    return 0
