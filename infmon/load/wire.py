"""The httpx path for streams: used when a test injects an ``httpx`` transport (scripted streams).

The load path proper is ``infmon.load.h1``; this one yields an ``Opened`` (the status, a body
reader for errors, an async iterator of body bytes as they arrive, and ``read_time()``: the
clock when the task gets the bytes) with the same decoding, timestamps and records above it.
It reads the body to its end after ``[DONE]`` so the connection is reused.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx

from infmon.net import within

DRAIN_S = 2.0
"""After ``[DONE]``, how long to wait for the end of the body (so the connection is reused)."""
MAX_ERROR_BODY = 64 * 1024


def is_success(status: int) -> bool:
    """A 2xx answer; anything else (a redirect too: it is not the stream asked for) fails."""
    return 200 <= status < 300


@dataclass(frozen=True, slots=True)
class Opened:
    status: int
    chunks: AsyncIterator[bytes]
    read_body: Callable[[], Awaitable[bytes]]
    read_time: Callable[[], float]
    """When the bytes last taken from ``chunks`` were read (never earlier than their arrival)."""
    retry_after: str | None = None
    """The response's ``Retry-After`` header (first 200 characters)."""


@contextlib.asynccontextmanager
async def httpx_post(
    http: httpx.AsyncClient,
    now: Callable[[], float],
    path: str,
    content: bytes,
    headers: dict[str, str],
) -> AsyncIterator[Opened]:
    async with http.stream("POST", path, content=content, headers=headers) as resp:
        identity = resp.headers.get("content-encoding", "identity") == "identity"
        chunks = (
            resp.aiter_raw() if identity and not resp.is_stream_consumed else resp.aiter_bytes()
        )
        retry_after = resp.headers.get("retry-after")
        yield Opened(
            resp.status_code,
            chunks,
            lambda: _read_capped(resp),
            now,
            retry_after[:200] if retry_after is not None else None,
        )


async def _read_capped(resp: httpx.Response, cap: int = MAX_ERROR_BODY) -> bytes:
    """The first ``cap`` bytes of an error body (a body that never ends is not waited for)."""
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= cap:
            break
    return b"".join(parts)[:cap]


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows ``[DONE]`` (the chunked terminator) so the connection goes back to the
    pool instead of being closed, and no half-read generator is left for the GC to close."""

    async def rest() -> None:
        async for _ in chunks:
            pass

    with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
        await within(rest(), DRAIN_S)
