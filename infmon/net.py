"""Bounded HTTP reads and TLS verification shared by every client infmon opens.

Every network read has a size and a time bound: ``bounded_get`` reads a body as it arrives and
stops at ``max_bytes`` (a page that never ends cannot grow memory) and at a total deadline (a
page that drips a byte a second cannot hang a scrape; httpx's own timeouts are per read).
``tls_verify`` is the one place that turns ``--ca-bundle`` / ``--insecure`` into what httpx and
the load path's own pool take: verification is on unless the operator switched it off.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


class FetchError(Exception):
    """A bounded read gave up; ``str()`` is one line."""


class FetchTimeout(FetchError):
    """The whole exchange took longer than its deadline."""


class FetchTooLarge(FetchError):
    """The body is larger than the cap."""


class TLSConfigError(ValueError):
    """The CA bundle cannot be loaded (one line, no traceback)."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    body: bytes
    """The whole body (never more than the cap), or its first bytes when the status is an error."""
    content_type: str


async def bounded_get(
    client: httpx.AsyncClient,
    url: str,
    *,
    max_bytes: int,
    deadline_s: float,
    max_error_bytes: int = 64 * 1024,
) -> Fetched:
    """GET ``url`` and read at most ``max_bytes`` of body within ``deadline_s`` seconds in all.

    Raises ``FetchTimeout`` / ``FetchTooLarge``, or httpx's own errors (connect, protocol).
    An error status (≥ 400) reads only ``max_error_bytes`` of its body.
    """
    fetch = _get(client, url, max_bytes, max_error_bytes)
    try:
        return await within(fetch, deadline_s)
    except asyncio.TimeoutError:
        raise FetchTimeout(f"no complete answer within {deadline_s:g} s") from None


async def within(aw: Coroutine[Any, Any, T], seconds: float) -> T:
    """``aw`` with a total deadline (``asyncio.TimeoutError`` past it).

    ``asyncio.timeout`` where there is one (3.11+): there, ``asyncio.wait_for`` can swallow a
    cancellation that races the inner read's completion (a poller told to stop then polled on
    for ever, and ``bench`` hung in its final scrape); ``asyncio.timeout`` cannot.
    """
    timeout = getattr(asyncio, "timeout", None)
    if timeout is None:  # pragma: no cover - Python 3.10
        return await asyncio.wait_for(aw, seconds)
    async with timeout(seconds):
        return await aw


async def _get(client: httpx.AsyncClient, url: str, max_bytes: int, max_error: int) -> Fetched:
    async with client.stream("GET", url) as resp:
        limit = max_error if resp.status_code >= 400 else max_bytes
        declared = resp.headers.get("content-length", "")
        if resp.status_code < 400 and declared.isdigit() and int(declared[:20]) > max_bytes:
            raise FetchTooLarge(f"body of {int(declared[:20]):,} bytes is over {_size(max_bytes)}")
        parts: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                if resp.status_code >= 400:
                    break
                raise FetchTooLarge(f"body is over {_size(max_bytes)}")
        body = b"".join(parts)[:limit]
        return Fetched(resp.status_code, body, resp.headers.get("content-type", ""))


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale:,} {unit}"
    return f"{n:,} bytes"


def tls_verify(ca_bundle: str | None, insecure: bool) -> ssl.SSLContext | bool:
    """What to verify server certificates with: off only for ``--insecure``; a context with the
    operator's CA bundle for ``--ca-bundle``; else the system's trust store (httpx's default)."""
    if insecure:
        return False
    if ca_bundle:
        try:
            return ssl.create_default_context(cafile=ca_bundle)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise TLSConfigError(
                f"cannot load CA bundle {ca_bundle}: {exc.__class__.__name__}"
            ) from None
    return True


def requests_verify(ca_bundle: str | None, insecure: bool) -> str | bool:
    """The same choice in the form ``requests`` takes (prometheus-api-client): a path or a bool."""
    tls_verify(ca_bundle, insecure)  # a bundle that cannot be loaded fails here, the same way
    if insecure:
        return False
    return ca_bundle or True
