"""The events pane's list: what happened, newest last, bounded; a repeat counted, not added.

An event equal (kind and text) to one of the last ``REPEAT_WITHIN`` is moved to the end with
its count raised ("queueing ×12"), so a cause that comes and goes does not flood the list.
"""

from __future__ import annotations

from collections import deque

from infmon.model.base.sanitize import redact_url
from infmon.model.live.dashboard import Event

REPEAT_WITHIN = 6
"""An event equal to one of the last few is counted on it (×N), not added again."""


class EventLog:
    def __init__(self, start_s: float, max_events: int) -> None:
        self.start_s = start_s
        self._events: deque[Event] = deque(maxlen=max_events)

    def add(self, now: float, kind: str, text: str) -> None:
        t, text = now - self.start_s, redact_url(text)  # an event may quote the target URL
        for e in reversed(list(self._events)[-REPEAT_WITHIN:]):
            if e.kind == kind and e.text == text:
                self._events.remove(e)
                self._events.append(Event(t, kind, text, e.count + 1))
                return
        self._events.append(Event(t, kind, text))

    def drop_last(self, kind: str, prefix: str) -> None:
        """Remove the newest event of ``kind`` whose text starts with ``prefix``."""
        for e in reversed(self._events):
            if e.kind == kind and e.text.startswith(prefix):
                self._events.remove(e)
                return

    def items(self) -> tuple[Event, ...]:
        return tuple(self._events)
