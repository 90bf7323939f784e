"""The monitor's last act, once: close the journal and write the report, whatever ended the app.

Two things used to cut it short, and each left a session with no report:

- A signal after the app ended. The app's event loop hands SIGTERM, SIGHUP and SIGINT back to
  their defaults on the way out, so one arriving while the report is written killed the process
  half-way. ``infmon serve`` meets it every time a page closes and its server is then stopped:
  the page's monitor is told to quit, starts its report, and gets the group's SIGTERM (or the
  operator's Ctrl+C) a moment later. From the app's unmount on, ``HeldSignals`` notes such a
  signal, says it, and lets the report finish (SIGKILL still stops at once).
- The last-resort exit after a signal (``InfmonApp.force_exit``, for an app wedged by a lost
  terminal) fired a fixed time after the signal, even while the report was being written on a
  loaded machine. ``WrapUp.force`` now waits for a wrap-up already under way.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Callable

HELD = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
FORCED_WAIT_S = 120.0
"""How long a forced exit waits for a wrap-up under way (a report of a long session on a busy
machine) before it gives up on it."""


class HeldSignals:
    """SIGTERM, SIGHUP and SIGINT noted, not fatal, while the session is finished."""

    def __init__(self) -> None:
        self.received: list[str] = []

    def hold(self) -> None:
        """Take the signals over (main thread), also from a running event loop, whose
        handlers would be reset to the defaults when it closes."""
        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            for sig in HELD:
                loop.remove_signal_handler(sig)
        for sig in HELD:
            signal.signal(sig, self._note)

    def release(self) -> None:
        """The defaults back (main thread only; a forced exit ends the process anyway)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in HELD:
            signal.signal(
                sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            )

    def _note(self, signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        line = f"infmon: {name}: finishing the session's report first (SIGKILL stops at once)\n"
        with contextlib.suppress(OSError):  # stderr may be a closed pipe (a page's server gone)
            os.write(2, line.encode())


class WrapUp:
    """``steps`` run once, by whichever comes first: the app's end or a forced exit."""

    def __init__(
        self, steps: Callable[[], None], exit_now: Callable[[int], None] = os._exit
    ) -> None:
        self.steps = steps
        self.exit_now = exit_now
        self.status = 0
        self._once = threading.Lock()
        self._done = threading.Event()

    def __call__(self) -> None:
        if not self._once.acquire(blocking=False):
            return
        try:
            self.steps()
        finally:
            self._done.set()

    def force(self) -> None:
        """Finish the session here, or let the wrap-up already under way finish; then exit."""
        self()
        self._done.wait(FORCED_WAIT_S)
        self.exit_now(self.status)
