"""Process settings for a load client: the event loop and the garbage collector.

``infmon bench`` and the monitor call ``tune_for_load()`` before their loop starts (``bench/client_overhead.py``
does the same for its infmon worker). uvloop reads and writes sockets in C: fewer µs per chunk,
so a burst of chunks is read sooner. ``gc.freeze()`` moves every object alive at that point (the
imported modules: most of the heap) out of the collector's reach, so the full collections that
the per-chunk JSON objects eventually trigger scan only what was allocated since: shorter pauses
of the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc


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
