"""The two ways a stream's bytes reach ``StreamingClient``: aiohttp (the load path) or httpx.

Measured against a minimal aiohttp client (``bench/client_overhead.py``), streaming through
httpx cost 1.3–1.9x the CPU per token (a chain of seven async generators, h11's pure-Python
parser per chunk) and its connection pool scans every connection on each request and release,
which broke down at 256 kept-alive streams. So streams go through one ``aiohttp.ClientSession``
(C HTTP parser, pooled keep-alive connections), the library ``vllm bench serve`` uses. An
injected ``httpx`` transport (scripted streams in tests) keeps the httpx path, with the same
decoding, timestamps and records above it.

Both yield an ``Opened``: the status, a body reader for errors, an async iterator of body bytes
as they arrive, and ``read_time()``: when the bytes just taken from the iterator were read from
the socket. On aiohttp that is noted by the connection's protocol at each read, before parsing
(``_TimedHandler``), so the time the stream's task waits to be scheduled behind other streams'
reads never counts as latency (at 256 streams that wait was most of the client-added delay per
chunk); on httpx it is the clock when the task gets the bytes. Both read the body to its end
after ``[DONE]`` so the connection is reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler

from infmon.model.records import ErrorKind

DRAIN_S = 2.0
"""After ``[DONE]``, how long to wait for the end of the body (so the connection is reused)."""


@dataclass(frozen=True, slots=True)
class Opened:
    status: int
    chunks: AsyncIterator[bytes]
    read_body: Callable[[], Awaitable[bytes]]
    read_time: Callable[[], float]
    """When the bytes last taken from ``chunks`` were read (never earlier than their arrival)."""


@dataclass(frozen=True, slots=True)
class WireSettings:
    base_url: str
    headers: dict[str, str]
    connect_timeout_s: float
    read_timeout_s: float
    max_connections: int
    verify: ssl.SSLContext | bool
    now: Callable[[], float] = field(default=time.perf_counter)


class _TimedHandler(ResponseHandler):
    """aiohttp's connection protocol, noting the time of each socket read before it is parsed.

    A stream's task takes the bytes later, after the loop has run every other ready callback;
    the time of the connection's latest read is when the newest of those bytes arrived, so it
    is never earlier than any event they complete.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, now: Callable[[], float]) -> None:
        super().__init__(loop)
        self._now = now
        self.read_s = math.nan

    def data_received(self, data: bytes) -> None:
        if data:  # aiohttp calls it with b"" itself to resume decoding: that is no read
            self.read_s = self._now()
        super().data_received(data)

    def read_time(self) -> float:
        return self.read_s


class _TimedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose connections are ``_TimedHandler``s."""

    def __init__(self, now: Callable[[], float], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._factory = functools.partial(_TimedHandler, loop=self._loop, now=now)  # type: ignore[assignment]


class AiohttpWire:
    """One aiohttp session, created inside the running loop on first use."""

    def __init__(self, settings: WireSettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        s = self.settings
        connector = _TimedConnector(s.now, limit=s.max_connections, limit_per_host=0, keepalive_timeout=30.0,
                                    ssl=s.verify, enable_cleanup_closed=False)  # fmt: skip
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=s.connect_timeout_s, sock_read=s.read_timeout_s)
        return aiohttp.ClientSession(base_url=s.base_url.rstrip("/") + "/", connector=connector, timeout=timeout,
                                     headers=s.headers, skip_auto_headers=("Accept-Encoding",),
                                     auto_decompress=True, trust_env=False)  # fmt: skip

    @contextlib.asynccontextmanager
    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> AsyncIterator[Opened]:
        if self._session is None:
            self._session = self._open_session()
        async with self._session.post(path.lstrip("/"), data=content, headers=headers) as resp:
            # A body that is already complete has released its connection: ask the response.
            conn = resp.connection
            proto = conn.protocol if conn is not None else getattr(resp, "_protocol", None)
            read_time = proto.read_time if isinstance(proto, _TimedHandler) else self.settings.now
            yield Opened(resp.status, resp.content.iter_any(), resp.read, read_time)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@contextlib.asynccontextmanager
async def httpx_post(http: httpx.AsyncClient, now: Callable[[], float], path: str, content: bytes,
                     headers: dict[str, str]) -> AsyncIterator[Opened]:  # fmt: skip
    async with http.stream("POST", path, content=content, headers=headers) as resp:
        identity = resp.headers.get("content-encoding", "identity") == "identity"
        chunks = resp.aiter_raw() if identity and not resp.is_stream_consumed else resp.aiter_bytes()
        yield Opened(resp.status_code, chunks, resp.aread, now)


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (the chunked terminator) so the connection goes back to the
    pool instead of being closed, and no half-read generator is left for the GC to close."""

    async def rest() -> None:
        async for _ in chunks:
            pass

    with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError, aiohttp.ClientError):
        await asyncio.wait_for(rest(), DRAIN_S)


def classify_aiohttp(exc: BaseException, connect_timeout_s: float, read_timeout_s: float) -> tuple[str, str] | None:
    """Map an aiohttp failure to (error kind, message); None when it is not a transport error."""
    reason = " ".join(str(exc).split())[:200] or exc.__class__.__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ErrorKind.CONNECT, f"connect timed out after {connect_timeout_s:g}s"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorKind.CONNECT, f"cannot connect ({reason})"
    if isinstance(exc, (aiohttp.SocketTimeoutError, asyncio.TimeoutError)):
        return ErrorKind.TIMEOUT, f"no data for {read_timeout_s:g}s (read timeout)"
    if isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientOSError)):
        return ErrorKind.RESET, f"connection closed mid-stream ({reason})"
    if isinstance(exc, aiohttp.ClientResponseError):
        return ErrorKind.PROTOCOL, f"HTTP protocol error ({reason})"
    if isinstance(exc, aiohttp.ClientError):
        return ErrorKind.OTHER, f"{exc.__class__.__name__}: {reason}"
    return None
