"""The direct source: GET a server's ``/metrics`` (and ``/v1/models``, ``/version``) with httpx.

Transport only; parsing and derivation live in ``exposition`` and ``canonical``. Keeps the
previous page so each snapshot carries rates and window statistics over the poll interval.
"""

from __future__ import annotations

from dataclasses import replace

import httpx

from infmon.model.server import ServerSnapshot
from infmon.sources.backends import table_named
from infmon.sources.backends.table import BackendTable
from infmon.sources.canonical import Readings, read_page, snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import ExpositionError, Page, parse_exposition


def split_url(url: str) -> tuple[str, str]:
    """(server base URL, metrics URL) from either form the operator may type."""
    url = url.rstrip("/")
    if url.endswith("/metrics"):
        return url[: -len("/metrics")], url
    return url, url + "/metrics"


async def fetch_page(client: httpx.AsyncClient, metrics_url: str) -> Page:
    """One GET of a metrics page; every failure becomes a ``SourceError``."""
    try:
        resp = await client.get(metrics_url)
    except httpx.TimeoutException as exc:
        raise SourceError(SourceError.TIMEOUT, f"{metrics_url}: {type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise SourceError(
            SourceError.CONNECT, f"{metrics_url}: {exc or type(exc).__name__}"
        ) from None
    if resp.status_code == 404:
        raise SourceError(SourceError.NO_METRICS, f"{metrics_url}: 404, no server metrics")
    if resp.status_code != 200:
        raise SourceError(SourceError.HTTP, f"{metrics_url}: HTTP {resp.status_code}")
    try:
        return parse_exposition(resp.content)
    except ExpositionError as exc:
        raise SourceError(SourceError.PARSE, str(exc)) from None


class DirectSource:
    """A server's own ``/metrics`` endpoint, polled directly."""

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient | None = None,
        backend: str | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        self.base_url, self.metrics_url = split_url(url)
        self.description = self.metrics_url
        self._own_client = client is None
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(timeout_s))
        self.table: BackendTable | None = table_named(backend) if backend else None
        self._prev: tuple[float, Readings] | None = None
        self._info: tuple[int | None, tuple[str, ...], str | None] | None = None

    async def _server_info(self) -> tuple[int | None, tuple[str, ...], str | None]:
        """``max_model_len`` and model ids from ``/v1/models``, version from ``/version``."""
        if self._info is not None:
            return self._info
        max_len, ids, version = None, (), None
        try:
            models = (await self.client.get(self.base_url + "/v1/models")).json().get("data", [])
            ids = tuple(str(m.get("id")) for m in models if isinstance(m, dict))
            lens = [m.get("max_model_len") for m in models if isinstance(m, dict)]
            max_len = next((int(x) for x in lens if isinstance(x, int)), None)
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        try:
            resp = await self.client.get(self.base_url + "/version")
            if resp.status_code == 200:
                version = resp.json().get("version")
        except (httpx.HTTPError, ValueError, AttributeError):
            pass
        self._info = (max_len, ids, version if isinstance(version, str) else None)
        return self._info

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        page = await fetch_page(self.client, self.metrics_url)
        cur = read_page(page, self.table)
        max_len, ids, version = await self._server_info()
        prev = self._prev
        self._prev = (now_s, cur)
        snap = snapshot_from(
            cur,
            prev[1] if prev else None,
            timestamp_s=now_s,
            window_s=now_s - prev[0] if prev else None,
            max_model_len=max_len,
            served_models=ids,
        )
        if version and snap.backend and snap.backend.startswith("vllm"):
            snap = replace(snap, backend_version=version)
        return snap

    async def aclose(self) -> None:
        if self._own_client:
            await self.client.aclose()
