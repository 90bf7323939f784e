"""`infmon demo`: start the built-in vLLM simulator on a free loopback port and open the monitor
on it (or, with ``--headless``, run a short bench against it and print the table).

The simulator runs as a child process so a wedged UI can never wedge it, and it is always
stopped: on quit, on a signal, and (Linux) even if infmon itself is killed.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import signal
import sys
from collections.abc import Callable, Iterator

from infmon.clock import MonotonicClock
from infmon.commands import CliError
from infmon.commands.common import say
from infmon.commands.load_args import add_load_arguments, config_from_args
from infmon.commands.monitor import add_monitor_arguments, run_monitor
from infmon.sim.launch import SimulatorStartError, start_simulator, stop_process

PR_SET_PDEATHSIG = 1
DEMO_STEP = "6s"
"""The demo's step unless set (flag, env or file): the sweep 1 … 512 names the baseline
simulator's knee in about 80 s (each level measured at least 3 × the previous level's E2E p90,
~7.5 s here), the story in two minutes."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scenario",
        default="baseline",
        help="simulator scenario (see `infmon sim --list`; default baseline)",
    )
    parser.add_argument(
        "--headless",
        action="store_true",
        help="no UI: run a short concurrency sweep and print the table",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=30.0,
        metavar="S",
        help="headless: total seconds for the sweep, the simulator's start, warm-ups and "
        "the reports included (default 30)",
    )
    parser.add_argument(
        "--sim-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument for `infmon sim` (repeatable), e.g. --sim-arg=--seed=2",
    )
    add_load_arguments(parser)
    add_monitor_arguments(parser)


def _die_with_parent() -> None:
    """Child side: get SIGTERM when the parent dies, however it dies (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def simulator_process(scenario: str, extra: list[str]) -> Iterator[tuple[str, Callable[[], None]]]:
    """Run ``infmon sim --port 0``; yields its URL and a function that stops it at once (for a
    forced exit); the process is gone when this exits."""
    args = ["--host", "127.0.0.1", "--port", "0", "--scenario", scenario, *extra]
    try:
        proc, url = start_simulator(
            args, preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None
        )
    except SimulatorStartError as exc:
        raise CliError(f"the simulator did not start: {exc}") from None
    try:
        yield url, lambda: stop_process(proc)
    finally:
        stop_process(proc)


def run(args: argparse.Namespace) -> int:
    started_s = MonotonicClock().now()
    with simulator_process(args.scenario, args.sim_arg) as (url, stop_sim):
        if args.headless:
            status = _headless(url, args, started_s + args.duration)
            took = MonotonicClock().now() - started_s
            say(
                f"demo: {took:.1f} s (--duration {args.duration:g}, the simulator's start included)"
            )
            return status
        args.url = url
        if args.label is None:
            args.label = f"demo-{args.scenario}"
        config = config_from_args(args, defaults={"step_duration": DEMO_STEP})
        return run_monitor(config, args, on_exit=stop_sim, sweep=True)


def _headless(url: str, args: argparse.Namespace, deadline_s: float) -> int:
    """A short sweep with `infmon bench`: four steps sharing the duration, the whole run
    (the simulator's start, each step's warm-up and drain, the reports) fitted to it as the
    steps go (``commands.budget``)."""
    levels = args.concurrency or "1,4,16,64"
    step_s = max(2.0, args.duration / len(levels.split(",")))
    argv = [
        "bench",
        url,
        "--concurrency",
        levels,
        "--step-duration",
        f"{step_s:g}s",
        "--label",
        args.label or f"demo-{args.scenario}",
    ]
    if args.session_dir:
        argv += ["--session-dir", args.session_dir]
    from infmon.commands import bench

    parser = argparse.ArgumentParser(prog="infmon bench")
    bench.add_arguments(parser)
    bench_args = parser.parse_args(argv[1:])
    bench_args.deadline_s = deadline_s
    return bench.run(bench_args)
