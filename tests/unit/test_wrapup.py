"""The monitor's wrap-up (``infmon.commands.wrapup``): a signal after the app ended no longer
kills the report half-way, and the last-resort exit waits for a report being written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from infmon.commands.wrapup import WrapUp
from tests.conftest import REPO

AFTER_THE_LOOP = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from infmon.commands.wrapup import HeldSignals

    held = HeldSignals()

    async def app() -> None:  # an app's loop with its own SIGTERM handler, as Textual's has
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, lambda: None)
        if sys.argv[1] == "hold":
            held.hold()  # the app's unmount

    asyncio.run(app())  # closing the loop resets the handlers it had
    os.kill(os.getpid(), signal.SIGTERM)  # serve's group stopped while the report is written
    print("report written", held.received)
    """
)


def run_after_the_loop(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", AFTER_THE_LOOP, mode],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_sigterm_after_the_app_ended_lets_the_report_finish() -> None:
    bare = run_after_the_loop("bare")
    assert bare.returncode == -15 and "report written" not in bare.stdout  # what it was
    held = run_after_the_loop("hold")
    assert held.returncode == 0, held.stderr
    assert "report written ['SIGTERM']" in held.stdout
    assert "SIGTERM: finishing the session's report first" in held.stderr


def test_a_forced_exit_waits_for_the_report_being_written() -> None:
    writing, written = threading.Event(), threading.Event()
    order: list[str] = []

    def steps() -> None:
        writing.set()
        written.wait(30)
        order.append("report")

    wrap = WrapUp(steps, exit_now=lambda status: order.append(f"exit {status}"))
    main = threading.Thread(target=wrap)
    main.start()
    assert writing.wait(30)
    forced = threading.Thread(target=wrap.force)  # the deadline after a signal passed
    forced.start()
    forced.join(0.5)
    assert forced.is_alive() and order == []  # it waits: no exit half-way through the report
    written.set()
    main.join(30)
    forced.join(30)
    assert order == ["report", "exit 0"]
