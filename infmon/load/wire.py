"""The two ways a stream's bytes reach ``StreamingClient``: aiohttp (the load path) or httpx.

Measured against a minimal aiohttp client (``bench/client_overhead.py``), streaming through
httpx cost 1.3–1.9x the CPU per token (a chain of seven async generators, h11's pure-Python
parser per chunk) and its connection pool scans every connection on each request and release,
which broke down at 256 kept-alive streams. So streams go through one ``aiohttp.ClientSession``
(C HTTP parser, pooled keep-alive connections), the library ``vllm bench serve`` uses. An
injected ``httpx`` transport (scripted streams in tests) keeps the httpx path, with the same
decoding, timestamps and records above it.

Both yield an ``Opened``: the status, a body reader for errors, and an async iterator of body
bytes as they arrive. Both read the body to its end after ``[DONE]`` so the connection is reused.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import aiohttp
import httpx

from infmon.model.records import ErrorKind

DRAIN_S = 2.0
"""After ``[DONE]``, how long to wait for the end of the body (so the connection is reused)."""


@dataclass(frozen=True, slots=True)
class Opened:
    status: int
    chunks: AsyncIterator[bytes]
    read_body: Callable[[], Awaitable[bytes]]


@dataclass(frozen=True, slots=True)
class WireSettings:
    base_url: str
    headers: dict[str, str]
    connect_timeout_s: float
    read_timeout_s: float
    max_connections: int
    verify: ssl.SSLContext | bool


class AiohttpWire:
    """One aiohttp session, created inside the running loop on first use."""

    def __init__(self, settings: WireSettings) -> None:
        self.settings = settings
        self._session: aiohttp.ClientSession | None = None

    def _open_session(self) -> aiohttp.ClientSession:
        s = self.settings
        connector = aiohttp.TCPConnector(limit=s.max_connections, limit_per_host=0, keepalive_timeout=30.0,
                                         ssl=s.verify,
                                         enable_cleanup_closed=False)  # fmt: skip
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=s.connect_timeout_s, sock_read=s.read_timeout_s)
        return aiohttp.ClientSession(base_url=s.base_url.rstrip("/") + "/", connector=connector, timeout=timeout,
                                     headers=s.headers, skip_auto_headers=("Accept-Encoding",),
                                     auto_decompress=True, trust_env=False)  # fmt: skip

    @contextlib.asynccontextmanager
    async def post(self, path: str, content: bytes, headers: dict[str, str]) -> AsyncIterator[Opened]:
        if self._session is None:
            self._session = self._open_session()
        async with self._session.post(path.lstrip("/"), data=content, headers=headers) as resp:
            yield Opened(resp.status, resp.content.iter_any(), resp.read)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@contextlib.asynccontextmanager
async def httpx_post(http: httpx.AsyncClient, path: str, content: bytes,
                     headers: dict[str, str]) -> AsyncIterator[Opened]:  # fmt: skip
    async with http.stream("POST", path, content=content, headers=headers) as resp:
        identity = resp.headers.get("content-encoding", "identity") == "identity"
        chunks = resp.aiter_raw() if identity and not resp.is_stream_consumed else resp.aiter_bytes()
        yield Opened(resp.status_code, chunks, resp.aread)


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
