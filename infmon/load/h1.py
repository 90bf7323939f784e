"""The load path's HTTP/1.1 client: keep-alive connections on ``asyncio.Protocol`` + httptools.

Why not aiohttp (measured with ``bench/client_overhead.py``, 256 streams, uvloop): there each
chunk went socket → protocol → stream reader → future → task wake-up → async iterator before
infmon saw it, and the request body was written by a task of its own (a loop turn later, behind
every other stream's chunks). Here the request is written to the socket in the caller's step,
and each response read is parsed in the protocol's ``data_received`` and handed, with the time
of that read, straight to the caller's ``sink``: no task wakes per chunk, and no stream waits
for another stream's task to be stamped. The awaiting task wakes once, when the body ends.

Scope: what an OpenAI-compatible streaming endpoint needs (one POST at a time per connection,
chunked or sized bodies, keep-alive, TLS, identity encoding). Failures raise ``WireError``.
Bounded: an error body is read up to ``MAX_ERROR_BODY`` and the connection is then dropped (a
server that sends one forever cannot hold the request); a stream's events are capped by its
sink's decoder; headers are capped by httptools.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol
from urllib.parse import urlsplit

import httptools

from infmon.load.wire import DRAIN_S, is_success
from infmon.model.records.request import ErrorKind
from infmon.net import within

MAX_ERROR_BODY = 64 * 1024
MAX_HEADER_VALUE = 200
"""The longest ``Retry-After`` value kept."""


class Exchange(NamedTuple):
    status: int
    error_body: bytes
    """The body's first ``MAX_ERROR_BODY`` bytes when the status is ≥ 300, else empty."""
    retry_after: str | None
    """The response's ``Retry-After`` header, as sent."""


class WireError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Sink(Protocol):
    """What a stream's body is fed to, read by read; ``done`` once ``[DONE]`` came."""

    done: bool
    status: int | None

    def feed(self, data: bytes, read_s: float) -> None:
        """``read_s``: when these bytes were read from the socket (``now()`` before parsing)."""


class Unanswered:
    """Exchanges sent whose response body has not begun: requests waiting for their first
    token. The load worker's outbox holds its own work while any wait (``infmon.engine.outbox``)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


UNANSWERED = Unanswered()
"""This process's count (every pool's, unless its settings name another)."""


@dataclass(frozen=True, slots=True)
class H1Settings:
    base_url: str
    headers: dict[str, str]
    connect_timeout_s: float
    read_timeout_s: float
    max_connections: int
    verify: ssl.SSLContext | bool
    now: Callable[[], float] = field(default=time.perf_counter)
    unanswered: Unanswered = field(default=UNANSWERED)


class _Conn(asyncio.Protocol):
    """One connection; carries one exchange at a time."""

    def __init__(
        self, now: Callable[[], float], read_timeout_s: float, unanswered: Unanswered = UNANSWERED
    ) -> None:
        self._now = now
        self._unanswered = unanswered
        self._waiting = False
        """This exchange counts in ``unanswered`` (sent, no body byte yet)."""
        self._read_timeout_s = read_timeout_s
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.keep_alive = True
        self.status = 0
        self.error_body: list[bytes] | None = None
        self.sink: Sink | None = None
        self.got_bytes = False
        self.complete = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._last_read_loop_s = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._encoding_ok = True
        self._draining = False
        self._read_s = 0.0
        self.retry_after: str | None = None
        self._error_body_full = False

    # -- exchange ---------------------------------------------------------------------------
    def begin(self, request: bytes, sink: Sink) -> asyncio.Future[None]:
        """Write the request now; the future resolves when the body ends or ``[DONE]`` came."""
        loop = asyncio.get_running_loop()
        self.sink, self.status, self.error_body, self.got_bytes, self.complete = (
            sink,
            0,
            None,
            False,
            False,
        )
        self._error, self._encoding_ok, self._draining = None, True, False
        self.retry_after, self._error_body_full = None, False
        self._waiter = loop.create_future()
        self._last_read_loop_s = loop.time()
        self._timer = loop.call_at(self._last_read_loop_s + self._read_timeout_s, self._check_idle)
        assert self.transport is not None
        self.transport.write(request)
        self._waiting = True
        self._unanswered.n += 1
        return self._waiter

    def _answered(self) -> None:
        if self._waiting:
            self._waiting = False
            self._unanswered.n -= 1

    def rearm(self) -> asyncio.Future[None]:
        """A new future for the end of the body (after ``[DONE]`` resolved the first)."""
        self._waiter = asyncio.get_running_loop().create_future()
        self._draining = True
        if self.complete or self.closed:
            self._resolve()
        return self._waiter

    def finish(self) -> None:
        self._answered()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.sink = None

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- asyncio.Protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._read_s = self._now()
        self.got_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            self._error = exc.__context__ or exc
        except httptools.HttpParserError as exc:
            self._error = WireError(ErrorKind.PROTOCOL, f"HTTP protocol error ({exc})")
        if self._error is not None or self._error_body_full:
            self.abort()  # an error body past the cap: what was read is enough
        self._last_read_loop_s = -1.0  # read since the timer was armed
        self._resolve()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._answered()
        if not self.complete and self._error is None and self._waiter is not None:
            self._error = WireError(
                ErrorKind.RESET, "connection closed mid-stream" + (f" ({exc})" if exc else "")
            )
        self._resolve()

    # -- httptools callbacks ----------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        low = name.lower()
        if low == b"content-encoding" and value.strip().lower() not in (b"identity", b""):
            self._encoding_ok = False
        elif low == b"retry-after":
            self.retry_after = value[:MAX_HEADER_VALUE].decode("latin-1")

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        if self.sink is not None:
            self.sink.status = self.status
        if not is_success(self.status):  # the body is the error, kept for its message
            self.error_body = []
        elif not self._encoding_ok:
            raise WireError(
                ErrorKind.PROTOCOL, "the server compressed the stream (infmon asks for identity)"
            )

    def on_body(self, body: bytes) -> None:
        if self.error_body is not None:
            self.error_body.append(body)
            if sum(map(len, self.error_body)) >= MAX_ERROR_BODY:
                self._error_body_full = True
        elif self.sink is not None:
            self._answered()
            self.sink.feed(body, self._read_s)

    def on_message_complete(self) -> None:
        self.complete = True

    # -- internals --------------------------------------------------------------------------
    def _resolve(self) -> None:
        w = self._waiter
        if w is None or w.done():
            return
        if self._error is not None:
            w.set_exception(self._error)
        elif (
            self.complete
            or self.closed
            or (not self._draining and self.sink is not None and self.sink.done)
        ):
            w.set_result(None)

    def _check_idle(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._last_read_loop_s < 0:  # reads since: re-arm one full period from now
            self._last_read_loop_s = now
            self._timer = loop.call_at(now + self._read_timeout_s, self._check_idle)
            return
        self._error = WireError(
            ErrorKind.TIMEOUT, f"no data for {self._read_timeout_s:g}s (read timeout)"
        )
        self.abort()
        self._resolve()


class H1Pool:
    """Keep-alive connections to one origin, at most ``max_connections`` at once."""

    def __init__(self, settings: H1Settings) -> None:
        self.settings = settings
        url = urlsplit(settings.base_url)
        self._https = url.scheme == "https"
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port or (443 if self._https else 80)
        self._prefix = url.path.rstrip("/")
        host_header = url.netloc.rsplit("@", 1)[-1]
        fixed = {"Host": host_header, **settings.headers}
        self._head = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._idle: list[_Conn] = []
        self._slots: asyncio.Semaphore | None = None

    def _ssl(self) -> ssl.SSLContext | None:
        if not self._https:
            return None
        v = self.settings.verify
        if isinstance(v, ssl.SSLContext):
            return v
        ctx = ssl.create_default_context()
        if not v:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    async def _connect(self) -> _Conn:
        s = self.settings
        loop = asyncio.get_running_loop()
        try:
            opening = loop.create_connection(
                lambda: _Conn(s.now, s.read_timeout_s, s.unanswered),
                self._host,
                self._port,
                ssl=self._ssl(),
            )
            _, conn = await within(opening, s.connect_timeout_s)
        except asyncio.TimeoutError:
            raise WireError(
                ErrorKind.CONNECT, f"connect timed out after {s.connect_timeout_s:g}s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            reason = " ".join(str(exc).split())[:200] or exc.__class__.__name__
            raise WireError(ErrorKind.CONNECT, f"cannot connect ({reason})") from None
        return conn

    def _request(self, path: str, content: bytes, headers: dict[str, str]) -> bytes:
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        head = f"POST {self._prefix}{path} HTTP/1.1\r\n{self._head}{extra}Content-Length: {len(content)}\r\n\r\n"
        return head.encode("latin-1") + content

    async def post(
        self, path: str, content: bytes, headers: dict[str, str], sink: Sink
    ) -> Exchange:
        """Send one request, feed its body to ``sink``; the status, error body and Retry-After."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.settings.max_connections)
        request = self._request(path, content, headers)
        async with self._slots:
            for attempt in (0, 1):
                conn = self._take()
                reused = conn is not None
                if conn is None:
                    conn = await self._connect()
                try:
                    await self._exchange(conn, request, sink)
                except WireError as exc:
                    # A kept-alive connection the server closed as we wrote: retry once, fresh.
                    retry = (
                        attempt == 0
                        and reused
                        and not conn.got_bytes
                        and exc.kind == ErrorKind.RESET
                    )
                    conn.finish()
                    if retry:
                        continue
                    raise
                except BaseException:
                    conn.finish()
                    conn.abort()
                    raise
                conn.finish()
                if conn.complete and conn.keep_alive and not conn.closed:
                    conn.got_bytes = False
                    self._idle.append(conn)
                elif not conn.closed:
                    conn.abort()
                body = b"".join(conn.error_body or ())[:MAX_ERROR_BODY]
                return Exchange(conn.status, body, conn.retry_after)
        raise AssertionError("unreachable")

    def _take(self) -> _Conn | None:
        """The most recently used idle connection still open (None: connect a new one)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _exchange(self, conn: _Conn, request: bytes, sink: Sink) -> None:
        if conn.closed:
            raise WireError(ErrorKind.RESET, "connection closed")
        await conn.begin(request, sink)
        if not conn.complete and not conn.closed:  # [DONE] came: read on to the end of the body
            with contextlib.suppress(asyncio.TimeoutError, WireError):
                await within(_wait(conn.rearm()), DRAIN_S)

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            if conn.transport is not None:
                conn.transport.close()


async def _wait(fut: asyncio.Future[None]) -> None:
    await fut
