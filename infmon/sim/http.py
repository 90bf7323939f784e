"""A minimal HTTP/1.1 server on ``asyncio.Protocol`` + ``httptools`` (keep-alive, chunked streams).

Chosen over uvicorn + an ASGI app because the simulator's streams are written from the engine
loop directly (one ``transport.write`` per chunk, no per-request task, no ASGI message dicts);
``bench/sim_capacity.py`` measures the result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass

import httptools

REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body or b"null")


class Connection(asyncio.Protocol):
    """One client connection; ``handler(request, conn)`` answers through the send methods."""

    def __init__(
        self, handler: Callable[[Request, Connection], None], on_lost: Callable[[Connection], None]
    ) -> None:
        self._handler = handler
        self._on_lost = on_lost
        self._parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.streaming: object = None  # the app's stream object while a response streams
        self._url = b""
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._keep_alive = True
        self.closed = False
        self.on_response: Callable[[int, int], None] | None = None  # (status, body bytes)
        self._stream_status = 200
        self._head_only = False  # a HEAD request: headers as for GET, no body (as uvicorn)

    # -- asyncio.Protocol ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            self.send_json(
                400,
                {
                    "error": {
                        "message": "malformed HTTP request",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    }
                },
            )
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._on_lost(self)

    # -- httptools callbacks ---------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", {}, []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        if self._headers.get("expect", "").lower() == "100-continue" and self.transport:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()
        path = self._url.decode("latin-1").split("?", 1)[0]
        method = self._parser.get_method().decode()
        self._head_only = method == "HEAD"
        self._handler(Request(method, path, self._headers, b"".join(self._body)), self)

    # -- responses --------------------------------------------------------------------------
    def _head(
        self, status: int, content_type: str, extra: dict[str, str] | None, length: int | None
    ) -> bytes:
        lines = [
            f"HTTP/1.1 {status} {REASONS.get(status, 'OK')}",
            "server: infmon-sim",
            f"content-type: {content_type}",
        ]
        lines.append(
            f"content-length: {length}" if length is not None else "transfer-encoding: chunked"
        )
        if not self._keep_alive:
            lines.append("connection: close")
        for k, v in (extra or {}).items():
            lines.append(f"{k}: {v}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def send(
        self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self._responded(status, len(body))
        if self.closed or self.transport is None:
            return
        head = self._head(status, content_type, extra, len(body))
        self.transport.write(head if self._head_only else head + body)
        if not self._keep_alive:
            self.close()

    def _responded(self, status: int, size: int) -> None:
        cb, self.on_response = self.on_response, None
        if cb is not None:
            cb(status, size)

    def send_json(self, status: int, obj: object, extra: dict[str, str] | None = None) -> None:
        self.send(status, json.dumps(obj).encode(), "application/json", extra)

    def start_stream(
        self, status: int, content_type: str, extra: dict[str, str] | None, first: bytes = b""
    ) -> None:
        self._stream_status = status
        if self.closed or self.transport is None:
            return
        head = self._head(status, content_type, extra, None)
        self.transport.write(head + (b"%x\r\n%s\r\n" % (len(first), first) if first else b""))

    def write_chunk(self, data: bytes) -> None:
        if not self.closed and self.transport is not None and data:
            self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self, last: bytes = b"") -> None:
        self.streaming = None
        self._responded(self._stream_status, 0)  # no content-length: the instrumentator sees 0
        if self.closed or self.transport is None:
            return
        tail = b"%x\r\n%s\r\n" % (len(last), last) if last else b""
        self.transport.write(tail + b"0\r\n\r\n")
        if not self._keep_alive:
            self.close()

    def write_raw(self, data: bytes) -> None:
        if not self.closed and self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.close()

    def abort(self) -> None:
        """Reset the connection (RST), as a crashed peer would."""
        if self.transport is not None and not self.closed:
            self.transport.abort()
