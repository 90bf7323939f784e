"""Who else uses the machine's CPUs: the controller's answer when a worker's load thread starves.

A worker's windows carry its load thread's run-queue wait (``infmon.load.selfcheck``). When
that wait is a real share of a window, the controller names the machine's top CPU users over
the last sampling period (``CpuUsers``, read on a thread of the controller every ``period_s``:
a few ms of CPU per read for a few hundred processes, never on a load loop). In-process load
has no such thread (it would hold the GIL beside the load loop): its notes say the share only.
"""

from __future__ import annotations

import threading
from dataclasses import replace

from infmon.clock import Clock
from infmon.engine import protocol as p
from infmon.load.selfcheck import CpuUsers
from infmon.model.records.client_late import Starving

PERIOD_S = 2.0


class CpuWatch:
    def __init__(self, clock: Clock, period_s: float = PERIOD_S) -> None:
        self.users = CpuUsers(clock)
        self.period_s = period_s
        self.own: set[int] = set()
        """The load workers' pids: their own CPU is their work, not starvation."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infmon-cpu-users", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        self.users.sample()
        while not self._stop.wait(self.period_s):
            self.users.sample()

    def annotate(self, w: p.Window) -> p.Window:
        """The window with the top CPU users named when its load thread starved."""
        if w.t1 <= w.t0 or not Starving(w.runq_s, w.runs, w.t1 - w.t0).starved:
            return w
        top = self.users.top(3, frozenset(self.own))
        return replace(w, cpu_users=", ".join(u.text() for u in top)) if top else w
