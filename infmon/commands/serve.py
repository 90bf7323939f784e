"""`infmon serve [--listen HOST:PORT] TARGET…`: the monitor in a browser.

textual-serve answers HTTP on ``HOST:PORT`` (loopback by default) and, for each browser that
opens the page, runs ``infmon TARGET…`` (``infmon URL [options]`` or ``infmon demo``) under
Textual's web driver: the same app, keys and panes as in a terminal. Each page is its own
monitor process, with its own session directory and report.

A page drives load against the operator's server, so only the printed URL opens it: it carries
a random token made at each start (``infmon.ui.web`` checks it, the WebSocket's Origin and the
Host). Any address but loopback needs ``--allow-remote``. An ``--api-key`` given here goes to
each page's monitor through its environment (``INFMON_API_KEY``), never on a command line.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import secrets
import shlex
import sys

from infmon.commands import CliError
from infmon.commands.common import hide_api_key_from_process_title
from infmon.model.base.sanitize import redact_url

DEFAULT_LISTEN = "127.0.0.1:8080"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where the web server listens (default {DEFAULT_LISTEN}: this machine only)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="listen on an address other machines can reach (plain HTTP: the URL's token is "
        "all that keeps others from driving your load)",
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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def take_api_key(target: list[str]) -> tuple[list[str], str | None]:
    """``target`` without ``--api-key VALUE`` (either spelling), and the key."""
    out, key, it = [], None, iter(target)
    for arg in it:
        if arg == "--api-key":
            key = next(it, None)
        elif arg.startswith("--api-key="):
            key = arg.split("=", 1)[1]
        else:
            out.append(arg)
    return out, key


def command_for(target: list[str]) -> str:
    """The shell command textual-serve runs for each page (``infmon`` of this interpreter);
    it never holds the API key (see ``run``)."""
    if not target:
        raise CliError("serve what? give a server URL (or `demo`), e.g. infmon serve demo")
    return shlex.join([sys.executable, "-m", "infmon", *target])


def run(args: argparse.Namespace) -> int:
    hide_api_key_from_process_title()
    host, port = parse_listen(args.listen)
    if not is_loopback(host) and not args.allow_remote:
        raise CliError(
            f"--listen {args.listen} can be reached from other machines, and every page drives "
            "load against your server over plain HTTP; add --allow-remote to do it anyway"
        )
    target, key = take_api_key(list(args.target))
    command = command_for(target)
    if key is not None:  # the pages' monitors read it from their environment
        os.environ["INFMON_API_KEY"] = key
    try:
        from infmon.ui.web import serve
    except ImportError:
        raise CliError("`infmon serve` needs textual-serve (pip install textual-serve)") from None
    token = secrets.token_urlsafe(24)
    shown = "[" + host + "]" if ":" in host else host
    what = " ".join(redact_url(a) for a in target)
    banner = f"infmon: serving `{what}` on http://{shown}:{port}/?token={token} (Ctrl+C stops)"
    if not is_loopback(host):
        print(
            f"infmon: warning: listening on {host}, reachable from other machines; anyone "
            "with the URL above drives your load (plain HTTP: the token can be sniffed)",
            file=sys.stderr,
        )
    serve(command, host, port, token, banner)
    return 0
