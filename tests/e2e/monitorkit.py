"""The live monitor in process for Pilot tests: built from a command line as `infmon` builds
it, and a poll for what its snapshots show."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from infmon.cli import build_parser
from infmon.commands.load_args import config_from_args
from infmon.commands.monitor import build_monitor
from infmon.commands.scale import scale_from_args


def monitor_app(*argv: str) -> tuple[Any, Any]:
    """(app, recorder) of ``infmon monitor ARGV`` (no signal handlers: the test drives it)."""
    args = build_parser().parse_args(["monitor", *argv])
    args.scale = scale_from_args(args)
    app, recorder = build_monitor(config_from_args(args), args)
    app.handle_signals = False
    return app, recorder


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll ``predicate`` every 0.1 s on the app's loop; fail after ``timeout_s``."""
    for _ in range(int(timeout_s / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")
