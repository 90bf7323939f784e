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
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os

REALTIME_PRIORITY = 1
REALTIME_BUSY_SHARE = 0.5
"""A real-time load thread busy more than this share of a second goes back to normal priority:
its load is then CPU-bound, and real time would take that CPU from whatever else runs here (a
server on the same cores) instead of sharing it."""


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
    return True, "real-time (SCHED_RR 1): it reads the moment data arrives, however busy the host"


def normal_priority() -> bool:
    """The calling thread back in ``SCHED_OTHER`` (always permitted); whether it took."""
    setter = getattr(os, "sched_setscheduler", None)
    if setter is None:
        return False
    try:
        setter(0, os.SCHED_OTHER, os.sched_param(0))
    except OSError:
        return False
    return True
