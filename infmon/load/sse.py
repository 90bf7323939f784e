"""A pure, incremental Server-Sent Events decoder (no I/O).

Feed it bytes exactly as they arrive (any split, LF / CRLF / CR line ends); it returns the
complete events. Comments (``:`` lines) are ignored, multi-line ``data`` is joined with
``\\n``, one leading space after the colon is dropped, as the WHATWG spec says. It never
raises on odd input except ``SSEEventTooLarge`` (an ``SSEError``) when one event (its ``data``
lines so far plus the line being read) outgrows ``max_event_bytes``: a server that sends
``data:`` lines and never the blank line that ends an event cannot grow memory without bound.
"""

from __future__ import annotations

from typing import NamedTuple


class SSEError(ValueError):
    """The byte stream cannot be SSE."""


class SSEEventTooLarge(SSEError):
    """One event grew past ``max_event_bytes`` (the request fails as ``oversized_event``)."""


MAX_EVENT_BYTES = 1024 * 1024
"""Default cap on one event (1 MiB; a vLLM chunk is ~200 bytes, a final usage chunk ~300)."""


class SSEEvent(NamedTuple):
    data: str
    event: str | None = None


class SSEDecoder:
    """Turns a byte stream into ``SSEEvent``s; cheap on the common ``data: {...}\\n\\n`` path."""

    __slots__ = ("_buf", "_data", "_data_bytes", "_event", "max_event_bytes")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._data_bytes = 0
        """Bytes held in ``_data`` (the pending event's lines)."""
        self._event: bytes | None = None
        self.max_event_bytes = max_event_bytes

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add bytes; return the events they complete (possibly none)."""
        if (
            not self._buf
            and not self._data
            and chunk.endswith(b"\n\n")
            and b"\r" not in chunk
            and len(chunk) <= self.max_event_bytes
        ):
            return self._whole_events(chunk)
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # A trailing CR may be the first half of CRLF: keep it for the next feed.
            hold = buf.endswith(b"\r")
            body = buf[:-1] if hold else buf
            body = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = body.split(b"\n")
            if hold:
                lines[-1] += b"\r"
        else:
            lines = buf.split(b"\n")
        self._buf = lines.pop()
        events: list[SSEEvent] = []
        for line in lines:
            self._line(line, events)
        if self._data_bytes + len(self._buf) > self.max_event_bytes:
            self._too_large()
        return events

    def _too_large(self) -> None:
        self._buf, self._data, self._data_bytes = b"", [], 0
        raise SSEEventTooLarge(f"one SSE event over {self.max_event_bytes:,} bytes")

    def _whole_events(self, chunk: bytes) -> list[SSEEvent]:
        """Fast path: ``chunk`` ends on an event boundary, nothing pending (servers write so)."""
        events: list[SSEEvent] = []
        for block in chunk[:-2].split(b"\n\n"):
            if block.startswith(b"data: ") and b"\n" not in block:
                events.append(SSEEvent(block[6:].decode("utf-8", "replace"), self._take_event()))
                continue
            for line in block.split(b"\n"):
                self._line(line, events)
            self._line(b"", events)
        return events

    def _take_event(self) -> str | None:
        event, self._event = self._event, None
        return event.decode("utf-8", "replace") if event else None

    def finish(self) -> list[SSEEvent]:
        """End of stream: dispatch what is pending (lenient: a missing final blank line is fine)."""
        events: list[SSEEvent] = []
        rest = self._buf.rstrip(b"\r")
        self._buf = b""
        if rest:
            self._line(rest, events)
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                data = b"\n".join(self._data).decode("utf-8", "replace")
                event = self._event.decode("utf-8", "replace") if self._event else None
                events.append(SSEEvent(data, event))
            self._data = []
            self._data_bytes = 0
            self._event = None
            return
        if line[0] == 0x3A:  # ":" comment
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_event_bytes:
                self._too_large()
        elif name == b"event":
            self._event = value
        # "id", "retry" and unknown fields carry nothing infmon needs.
