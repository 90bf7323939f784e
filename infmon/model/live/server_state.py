"""What the live session keeps of the server: the last good snapshot, the window means that are
rare (held at their last value instead of blinking to unknown), and ``max_num_seqs`` inferred.

vLLM does not publish ``max_num_seqs``. When requests wait while the running count stays at
one value, that value is the cap: the view says "≈ 256 (inferred)", and shows nothing until
the server has queued.
"""

from __future__ import annotations

import math
from dataclasses import replace

from infmon.model.live.dashboard import ServerView
from infmon.model.live.server_view import server_view_from
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.knee import QUEUE_FRACTION

HELD_FIELDS = ("queue_s", "prefill_s", "decode_s", "prefix_hit_rate")
CAP_SAMPLES = 3
"""Scrapes with a queue and the same running count before the cap is inferred."""


class ServerState:
    def __init__(self) -> None:
        self.last: ServerSnapshot | None = None
        self.last_at_s: float | None = None
        self._held: dict[str, float] = {}
        self._capped: dict[float, int] = {}

    def add(self, snap: ServerSnapshot) -> None:
        self.last, self.last_at_s = snap, snap.timestamp_s
        running, waiting = snap.running, snap.waiting
        if running and waiting is not None and waiting > max(1.0, QUEUE_FRACTION * running):
            self._capped[running] = self._capped.get(running, 0) + 1

    @property
    def max_num_seqs(self) -> float:
        """The running count the server stopped at while requests waited (nan: not seen)."""
        seen = [r for r, n in self._capped.items() if n >= CAP_SAMPLES]
        return max(seen) if seen else math.nan

    def view(self, tokens_per_seq: float) -> ServerView:
        if self.last is None:
            return ServerView()
        view = server_view_from(self.last, tokens_per_seq)
        changes: dict[str, float | bool] = {}
        for name in HELD_FIELDS:
            value = getattr(view, name)
            if math.isnan(value):
                if name in self._held:
                    changes[name] = self._held[name]
            else:
                self._held[name] = value
        cap = self.max_num_seqs
        if not math.isnan(cap):
            changes.update(max_num_seqs=cap, max_num_seqs_inferred=True)
        return replace(view, **changes) if changes else view  # type: ignore[arg-type]
