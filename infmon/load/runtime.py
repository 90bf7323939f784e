"""Process settings for a load client: the event loop, the garbage collector and the load
thread's scheduling.

``infmon bench`` and the monitor call ``tune_for_load()`` before their loop starts (``bench/client_overhead.py``
does the same for its infmon worker). uvloop reads and writes sockets in C: fewer µs per chunk,
so a burst of chunks is read sooner. ``gc.freeze()`` moves every object alive at that point (the
imported modules: most of the heap) out of the collector's reach, so the full collections that
the per-chunk JSON objects eventually trigger scan only what was allocated since: shorter pauses
of the loop.

``realtime_load_thread()`` puts a load worker's one thread in ``SCHED_RR`` at priority 1 where
the operator's rights allow it (root, ``CAP_SYS_NICE``, or ``ulimit -r 1``). On a host whose
cores a server keeps busy (vLLM's CPU engine beside the client, a bastion running other jobs)
a normal thread that sleeps between reads waits for a core when its data arrives: measured
beside the real vLLM of ``bench/real_truth.py`` (2 cores, c=16), a 2 ms sleep woke late by
p90 3-87 ms, p99 85-445 ms; the same sleep in SCHED_RR 1 by p99 0.06-0.11 ms (``nice -10``
did not help: each session is its own scheduling group, and nice only ranks within one). The
thread uses the CPU its load needs either way (4% of a core at c=4, 12% at c=16 here); real time only
changes when it gets it, and the kernel caps real-time threads at 95% of a core.

A kernel may still let such a light real-time thread starve the host's normal threads. On this
project's 2-vCPU Firecracker VM (Linux 6.18) beside the real vLLM at c=4, in some hours, a normal
process's 0.5 s sleep woke 7-25 s late while the load thread ran on time, infmon's own
controller got no CPU for as long (a 20 s step lasted 35 s), and the kernel logged workqueue
lockups; at normal priority the same sleep woke at most 1 s late. In other hours on the same VM
none of it happened (16 real-time runs, the sleep ≤ 1 s late), and a plain real-time spinner on
a core delays a normal thread there by 0.3 s at most (the kernel's fair server). It is not the
load thread's CPU share: the same load thread in ``SCHED_DEADLINE`` with a budget of 2 ms in
10 ms (20% of a core, set from outside with ``chrt -d``) left a sleeping normal process 1.9 s
late at p50 and 2.95 s at worst, as ``SCHED_RR`` did (1.2 / 3.3 s), against 0.29 / 0.6 s with
the load thread at normal priority, beside vLLM at c=4 (3 Dec). So a
``WakeCanary`` (a normal thread that sleeps 0.1 s and notes how late it wakes) runs beside a
real-time load thread, and a wait of ``STARVED_WAIT_S`` while the load thread kept time sends
it back to normal priority, saying so, until ``retry_after`` says to try real time again.
The canary lives in the load worker's process, and the host can starve another process while
the canary keeps time: infmon's own controller (the monitor's screen and journal) got 0.2 s of
CPU in 11.9 s beside the real vLLM (6 Dec) and the canary saw nothing. So the worker also reads
the controller's accounts in the kernel (``ControllerWatch``): ``CONTROLLER_STARVED_S`` runnable
with no CPU sends the load thread away from real time the same way.
Plain normal priority here costs the truth (beside vLLM at c=4: TTFT p99 ~900 ms against ~20 ms,
half the tokens a second, which the client self-check flags), so the bar is a starvation no busy
host explains, not a slow wake-up.

So a starved host sends the load thread to the top of the fair class, not to plain normal:
``high_fair_share()`` sets the load worker's scheduling group (its session's autogroup, which the
kernel weighs against the server's groups: per-thread nice only ranks threads within a group,
which is why ``nice -10`` did nothing above) and the thread to nice -20, and asks for 0.1 ms
slices (a thread whose slice is shorter than the running one's may preempt it when it wakes). A
fair-class thread cannot starve the host the way a real-time one did here: it gets a CPU by
weight, and with 4-12% of a core its weight only decides how soon. ``python bench/real_truth.py
--clients default,high,vllm --threads`` beside the real vLLM (4 Dec, A-B-B-A, the server's own
histograms the arbiter, a process in its own session sleeping 0.5 s beside each run): the client
added to TTFT 1.3-1.6 ms in real time and 2.2-2.8 ms at high fair share at c=4 (``vllm bench
serve``: 48-81), 3.7-5.5 and 4.4-4.7 ms at c=16, TPOT 0.997-1.014 of the server's for both; the
sleeper woke up to 2.8 s late beside real time at c=4 and at most 0.73 s beside high. Measured
costs of the high fair share: a wake-up on a busy core can still wait (0.03-1.0 ms on average
beside vLLM, 0.1-0.2 ms beside six spinning processes on one core, against ~0.01 ms in real
time), and the server ran 10-25% slower beside it than beside real time in every pair (cause not
found). So real time stays the default where it does no harm; giving it up for a starved host
lands on the high fair share, for the rest of the run in ``infmon bench``
(``Config.realtime_again``: one priority per sweep); ``--load-priority high`` asks for it alone,
and a load that keeps the thread busy goes to plain normal instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import gc
import os
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from infmon.load.selfcheck import thread_sched

REALTIME_PRIORITY = 1
REALTIME_BUSY_SHARE = 0.5
"""A real-time load thread busy more than this share of a second goes back to normal priority:
its load is then CPU-bound, and real time would take that CPU from whatever else runs here (a
server on the same cores) instead of sharing it."""

STARVED_WAIT_S = 5.0
"""A normal thread beside a real-time load thread that waits this long past its wake-up for a core,
while the load thread's own wake-ups came on time: real time starves the host's other threads
here, and the load thread goes back to normal. The bar weighs what each side costs. The
starvation it catches lasted 7-25 s (a 20 s step lasted 35 s, workqueue lockups). In another
hour (3 Dec) a real-time thread beside vLLM at c=4 let a sleeping normal process wake 2.1-3.7 s
late at worst, and going back to normal priority there cost the truth, not just speed: TTFT p50
25 ms and mean 77 ms against 9.6 and 9.7, 787 tok/s against 1,643, the load thread waiting for a
CPU 81-90% of the time, while the same sleeper still woke up to 0.7 s late. A 2 s bar gave real
time up in every such run (the real-server tests then measured nothing); 5 s keeps it there and
still catches the long starvation. The next run that day met 5.3 s twice in six minutes, gave
real time up both times and measured nothing in those stretches (the self-check said so): on
this host in such an hour neither priority gives both a true measurement and a live host."""
CONTROLLER_STARVED_S = 3.0
"""infmon's own controller (the monitor's screen and journal, bench's steps) on this host that
waited this long on a run queue while hardly running, beside a real-time load thread that kept
time: the load thread goes back to normal, as for ``STARVED_WAIT_S``. The canary sits in the load
worker's process, and on this VM it can run on time while the controller starves: beside the
real vLLM at c=2 (6 Dec) the monitor's threads ran 0.2 s in 11.9 s and waited 10.8 s, a report
asked for with `s` came 12-28 s later in 9 of 36 runs, once not at all in 30 s (a CI run), while
the canary never waited 5 s; with the load thread at the high fair share, 1.0-4.4 s in 10 of 10.
The bar is lower than the canary's because the reading is not a wake-up's lateness, which a busy
host explains, but seconds in which the controller was runnable and got (almost) no CPU, which a
fair scheduler does not do to it: ``ControllerWatch``."""
OWN_LATE_S = 0.5
"""The load thread's own once-a-second wake-up later than this: the host took the CPU from every
thread (a vCPU the hypervisor paused, a suspended VM), and real time is not what starved them."""
RETRY_S = 30.0
RETRY_MAX_S = 600.0
"""After a starvation the load thread tries real time again ``RETRY_S`` later, then twice as
long after each further starvation, up to ``RETRY_MAX_S``: the starvation seen here came and
went by the hour, and a monitor left running should have its truth back when it passes. Real
time that then holds ``RETRY_MAX_S`` starts the count again (that starvation passed)."""


def tune_for_load() -> list[str]:
    """Apply both settings (uvloop only where installed); returns what was applied."""
    applied = []
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        applied.append("uvloop")
    gc.collect()
    gc.freeze()
    applied.append("gc.freeze")
    return applied


def realtime_load_thread() -> tuple[bool, str]:
    """The calling thread (a load worker's loop) in ``SCHED_RR`` at ``REALTIME_PRIORITY``, not
    inherited by any process it starts; whether it took, and one line saying so or why not."""
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:
        return False, "normal priority (this system has no real-time scheduling)"
    try:
        policy = os.SCHED_RR | getattr(os, "SCHED_RESET_ON_FORK", 0)
        setter(0, policy, os.sched_param(REALTIME_PRIORITY))
    except PermissionError:
        return False, (
            "normal priority: real-time not permitted (root, CAP_SYS_NICE or `ulimit -r 1` "
            "lets it read the moment data arrives on a busy host)"
        )
    except OSError as exc:
        return False, f"normal priority: real-time refused ({exc.strerror or exc})"
    _autogroup_nice(0)  # a high fair share given before: the canary's group weighs as others do
    return True, "real-time (SCHED_RR 1): it reads the moment data arrives, however busy the host"


HIGH_NICE = -20


def high_fair_share() -> tuple[bool, str]:
    """The calling thread at nice ``HIGH_NICE`` in the fair class, and its process's autogroup
    too when the process leads its own session (a load worker process: the group is the worker
    alone); whether the thread's nice took, and one line saying so or why not."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), HIGH_NICE)
    except PermissionError:
        return False, "normal priority: nice -20 not permitted (root or CAP_SYS_NICE)"
    except (AttributeError, OSError) as exc:
        return False, f"normal priority: nice -20 refused ({getattr(exc, 'strerror', None) or exc})"
    short = ", 0.1 ms slices" if _short_slices(HIGH_NICE) else ""
    group = " and its scheduling group" if _autogroup_nice(HIGH_NICE) else ""
    return (
        True,
        f"high fair share (nice {HIGH_NICE}{short}{group}): the first of the host's threads to a "
        "free core",
    )


SHORT_SLICE_NS = 100_000
"""The fair-class slice the load thread asks for (the kernel's least, 0.1 ms; Linux 6.12+): a
thread whose slice is shorter than the running one's may preempt it when it wakes, instead of
waiting for the running one's slice (3 ms by default) to end."""
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}


def _short_slices(nice: int) -> bool:
    """Ask for ``SHORT_SLICE_NS`` slices for the calling thread at ``nice``; whether the kernel
    says the thread has them (False: not Linux, an architecture not listed, a kernel that refuses
    it or accepts and ignores it, as those before 6.12 do, or one that does not report slices)."""
    return _fair_attr(nice, SHORT_SLICE_NS) and _slice_ns() == SHORT_SLICE_NS


def _fair_attr(nice: int, slice_ns: int) -> bool:
    """The calling thread in ``SCHED_OTHER`` at ``nice`` with a slice of ``slice_ns`` (0: the
    kernel's default), by ``sched_setattr``, which Python's ``os`` does not wrap; whether the call
    succeeded."""
    number = _SCHED_SETATTR.get(os.uname().machine) if hasattr(os, "uname") else None
    if number is None:
        return False
    # struct sched_attr, version 1: size, policy, flags, nice, priority, runtime (the slice for
    # SCHED_OTHER), deadline, period, util_min, util_max
    attr = struct.pack("IIQiIQQQII", 56, os.SCHED_OTHER, 0, nice, 0, slice_ns, 0, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, len(attr))
    return bool(ctypes.CDLL(None, use_errno=True).syscall(number, 0, buf, 0) == 0)


def _slice_ns() -> int | None:
    """The calling thread's fair-class slice as the kernel reports it (``se.slice`` in
    ``/proc/thread-self/sched``: Linux 6.12+ with scheduler debugging; None where it does not)."""
    try:
        with open("/proc/thread-self/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return int(line.split(":")[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def plain_normal() -> None:
    """The calling thread at nice 0 in ``SCHED_OTHER`` with the default slice, its own session's
    autogroup at 0."""
    normal_priority()
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 0)
    _fair_attr(0, 0)  # the kernel's default slice again
    _autogroup_nice(0)


def _autogroup_nice(nice: int) -> bool:
    """Set this process's autogroup nice when the process leads its own session (so the group is
    its own); whether it took (False: no autogroups here, or not permitted)."""
    if os.getsid(0) != os.getpid():
        return False
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        return False
    return True


def normal_priority() -> bool:
    """The calling thread back in ``SCHED_OTHER`` at the nice it had (always permitted); whether
    it took."""
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:
        return False
    try:
        setter(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Harm:
    """Why a real-time load thread goes back to normal priority; ``retry``: real time may be
    taken again later (a starvation can pass; a CPU-bound load does not)."""

    text: str
    retry: bool


def realtime_harm(
    busy: float, waited_s: float, own_late_s: float, controller_s: float = 0.0
) -> Harm | None:
    """Why a real-time load thread should go back to normal priority (None: it should not), from
    the share of the last second its own load kept it busy, the longest a normal thread beside it
    waited past a wake-up for a core, how late its own wake-up came over that second, and how long
    infmon's controller on this host has been starved (``ControllerWatch``)."""
    if own_late_s < OWN_LATE_S and controller_s >= CONTROLLER_STARVED_S:
        return Harm(
            "infmon's own controller (the process that journals and shows the load) got no CPU "
            f"for {controller_s:.0f} s "
            "while it ran on time (this host's kernel lets a real-time thread starve the others)",
            retry=True,
        )
    if waited_s >= STARVED_WAIT_S and own_late_s < OWN_LATE_S:
        return Harm(
            f"a normal thread beside it waited {waited_s:.1f} s for a core while it ran on time "
            "(this host's kernel lets a real-time thread starve the others)",
            retry=True,
        )
    if busy > REALTIME_BUSY_SHARE:
        return Harm(
            f"its load kept it busy {100 * busy:.0f}% of a second (real time would take that "
            "CPU from the server, not share it)",
            retry=False,
        )
    return None


def retry_after(previous_s: float, held_s: float = 0.0) -> float:
    """The time at normal priority before real time is tried again after a starvation: the
    first ``RETRY_S``, then twice the last, up to ``RETRY_MAX_S``; ``RETRY_S`` again when real
    time had held ``held_s`` ≥ ``RETRY_MAX_S`` before this starvation (the last one passed)."""
    if previous_s <= 0 or held_s >= RETRY_MAX_S:
        return RETRY_S
    return min(2 * previous_s, RETRY_MAX_S)


class WakeCanary:
    """A daemon thread at normal priority that sleeps ``every_s`` in a loop; ``waited()`` is the
    longest it waited past a wake-up since the last call, counting the wake-up it is waiting for
    now (a starved canary cannot report, so the reader measures from its last beat)."""

    def __init__(self, every_s: float = 0.1) -> None:
        self.every_s = every_s
        self._beat = time.monotonic()
        self._late: collections.deque[float] = collections.deque(maxlen=64)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="infmon-wake-canary", daemon=True)

    def start(self) -> None:
        self._beat = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def waited(self) -> float:
        """Seconds: the worst late wake-up since the last call, or the current one if longer."""
        worst = time.monotonic() - self._beat - self.every_s
        while self._late:
            worst = max(worst, self._late.popleft())
        return worst

    def _run(self) -> None:
        normal_priority()  # a normal thread, whatever the one that started it runs at
        while not self._stop.wait(self.every_s):
            now = time.monotonic()
            self._late.append(now - self._beat - self.every_s)
            self._beat = now


STARVED_SHARE = 0.5
"""Over a span in which one of the controller's threads waited on a run queue at least this share
of it while the whole process ran under ``STARVED_CPU`` of it, the controller was starved."""
STARVED_CPU = 0.01
"""Under a fair scheduler a runnable process gets its weight's share however busy the host: a
default-weight one beside six spinners in groups weighing 3x each still runs ~5% of a core
(``tests/e2e/test_starved_client.py``). Starved beside real time it ran 0.00 s in 8-11 s."""
WATCH_SPAN = 16
"""Readings kept (about one a second): the longest starvation ``ControllerWatch`` can report."""


class ControllerWatch:
    """infmon's controller process, seen from a load worker on its host through the kernel's
    accounts (``/proc/PID/task/*/schedstat``: CPU time, run-queue wait). ``starved_s()``, read
    about once a second, is how long the controller has been starved up to now: the longest span
    back from now over which a thread of it waited for a core ``STARVED_SHARE`` of the time while
    the process ran under ``STARVED_CPU`` of it (0: it ran, it is gone, or the kernel keeps no
    accounts). A controller blocked on its own work is not runnable and never counts; one that
    competes on a busy host gets its fair share and does not either."""

    def __init__(
        self, pid: int, proc: str = "/proc", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tasks = f"{proc}/{pid}/task"
        self.clock = clock
        self._seen: collections.deque[tuple[float, dict[str, tuple[float, float]]]] = (
            collections.deque(maxlen=WATCH_SPAN)
        )

    def _read(self) -> dict[str, tuple[float, float]]:
        """Each thread's (CPU s, run-queue wait s); empty when the process or its accounts are
        not there."""
        out = {}
        with contextlib.suppress(OSError):
            for tid in os.listdir(self.tasks):
                if (acct := thread_sched(f"{self.tasks}/{tid}/schedstat")) is not None:
                    out[tid] = acct[:2]
        return out

    def starved_s(self) -> float:
        now, threads = self.clock(), self._read()
        if not threads:  # gone, or no accounts: nothing to say
            self._seen.clear()
            return 0.0
        longest = 0.0
        for then, before in self._seen:
            span = now - then
            if span <= longest:
                continue
            cpu = sum(c - before.get(tid, (c, w))[0] for tid, (c, w) in threads.items())
            wait = max(w - before.get(tid, (c, w))[1] for tid, (c, w) in threads.items())
            if wait >= STARVED_SHARE * span and cpu < STARVED_CPU * span:
                longest = span
        self._seen.append((now, threads))
        return longest
