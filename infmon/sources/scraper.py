"""The direct source: GET a server's ``/metrics`` (and ``/v1/models``, ``/version``) with httpx.

Transport only; parsing and derivation live in ``exposition``, ``readings`` and ``canonical``.
Keeps the previous page so each snapshot carries rates and window statistics over the poll
interval.

Bounded (``ScrapeLimits``): one read of ``/metrics`` has a total deadline (default 5 s: a page
that drips a byte a second fails as ``timeout``), a size cap (16 MiB: a page that never ends
fails as ``too_large`` without holding more) and a series cap (100,000: beyond it the page is
rejected as ``too_many_series`` before parsing) and the parser's bounds (lines, line length,
labels per series, and the parse itself within as many seconds of its thread's CPU time:
``too_complex``; a parse a starved host gives no core for a minute: ``timeout``). Parsing
runs in a worker thread, off the caller's event loop. Certificates are verified unless ``--insecure``; ``--ca-bundle`` applies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from infmon.config import Config
from infmon.model.base.sanitize import clean, loads_json
from infmon.model.server.snapshot import ServerSnapshot
from infmon.net import FetchTimeout, FetchTooLarge, TLSConfigError, bounded_get, tls_verify
from infmon.sources.backends import table_named
from infmon.sources.backends.table import BackendTable
from infmon.sources.canonical import snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import (
    MAX_SERIES,
    ExpositionError,
    Page,
    ParseStarved,
    TooComplex,
    TooManySeries,
    parse_exposition,
)
from infmon.sources.gpu import GpuReading, dcgm_gpus
from infmon.sources.poller import SnapshotSource
from infmon.sources.readings import Readings, read_page

INFO_MAX_BYTES = 1024 * 1024
"""``/v1/models`` and ``/version`` are read up to this."""
MAX_MODEL_LEN = 10**9


@dataclass(frozen=True, slots=True)
class ScrapeLimits:
    """The bounds of one scrape (``--metrics-timeout``, ``--metrics-max-bytes``,
    ``--metrics-max-series``)."""

    timeout_s: float = 5.0
    max_bytes: int = 16 * 1024 * 1024
    max_series: int = MAX_SERIES

    @classmethod
    def from_config(cls, config: Config) -> ScrapeLimits:
        return cls(config.metrics_timeout_s, config.metrics_max_bytes, config.metrics_max_series)


def split_url(url: str) -> tuple[str, str]:
    """(server base URL, metrics URL) from either form the operator may type."""
    url = url.rstrip("/")
    if url.endswith("/metrics"):
        return url[: -len("/metrics")], url
    return url, url + "/metrics"


def make_http_client(
    timeout_s: float, ca_bundle: str | None = None, insecure: bool = False
) -> httpx.AsyncClient:
    """The source's own client: per-read timeout, TLS verified unless ``insecure``."""
    try:
        verify = tls_verify(ca_bundle, insecure)
    except TLSConfigError as exc:
        raise SourceError(SourceError.OTHER, str(exc)) from None
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), verify=verify, trust_env=False)


async def fetch_body(client: httpx.AsyncClient, metrics_url: str, limits: ScrapeLimits) -> bytes:
    """One bounded GET of a metrics page; every failure becomes a ``SourceError``."""
    try:
        got = await bounded_get(
            client, metrics_url, max_bytes=limits.max_bytes, deadline_s=limits.timeout_s
        )
    except FetchTimeout as exc:
        raise SourceError(SourceError.TIMEOUT, f"{metrics_url}: {exc}") from None
    except FetchTooLarge as exc:
        raise SourceError(
            SourceError.TOO_LARGE, f"{metrics_url}: {exc} (--metrics-max-bytes)"
        ) from None
    except httpx.TimeoutException as exc:
        raise SourceError(SourceError.TIMEOUT, f"{metrics_url}: {type(exc).__name__}") from None
    except httpx.HTTPError as exc:
        raise SourceError(
            SourceError.CONNECT, f"{metrics_url}: {exc or type(exc).__name__}"
        ) from None
    if got.status in (404, 501):  # 501: llama.cpp's server started without --metrics
        raise SourceError(SourceError.NO_METRICS, f"{metrics_url}: {got.status}, no server metrics")
    if got.status != 200:
        raise SourceError(SourceError.HTTP, f"{metrics_url}: HTTP {got.status}")
    return got.body


def parse_page(body: bytes, limits: ScrapeLimits) -> Page:
    """Page bytes → samples within the page's bounds, the parse itself within
    ``limits.timeout_s`` of its thread's CPU time; every failure becomes a ``SourceError``
    (CPU work: off the loop)."""
    try:
        return parse_exposition(body, limits.max_series, limits.timeout_s)
    except ParseStarved as exc:
        raise SourceError(SourceError.TIMEOUT, str(exc)) from None
    except TooManySeries as exc:
        raise SourceError(SourceError.TOO_MANY_SERIES, str(exc)) from None
    except TooComplex as exc:
        raise SourceError(SourceError.TOO_COMPLEX, str(exc)) from None
    except ExpositionError as exc:
        raise SourceError(SourceError.PARSE, str(exc)) from None


def parse_body(body: bytes, limits: ScrapeLimits, table: BackendTable | None) -> Readings:
    """Page bytes → readings (CPU work: run it off the event loop)."""
    return read_page(parse_page(body, limits), table)


class DirectSource:
    """A server's own ``/metrics`` endpoint, polled directly."""

    def __init__(
        self,
        url: str,
        *,
        client: httpx.AsyncClient | None = None,
        backend: str | None = None,
        timeout_s: float | None = None,
        limits: ScrapeLimits | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> None:
        self.base_url, self.metrics_url = split_url(url)
        self.description = self.metrics_url
        self.limits = limits or ScrapeLimits()
        if timeout_s is not None and limits is None:
            self.limits = replace(self.limits, timeout_s=timeout_s)
        self._own_client = client is None
        self.client = client or make_http_client(self.limits.timeout_s, ca_bundle, insecure)
        self.table: BackendTable | None = table_named(backend) if backend else None
        self._prev: tuple[float, Readings] | None = None
        self.detected: str | None = None
        """The backend the last page's names point to (whatever ``backend`` forced)."""
        self._info: tuple[int | None, tuple[str, ...], str | None] | None = None

    @classmethod
    def from_config(
        cls, config: Config, url: str | None = None, *, backend: str | None = None
    ) -> DirectSource:
        """The source for a run: its bounds and TLS settings from the same ``Config``."""
        return cls(
            url or config.url or "",
            backend=backend,
            limits=ScrapeLimits.from_config(config),
            ca_bundle=config.ca_bundle,
            insecure=config.insecure,
        )

    async def _json(self, path: str) -> Any:
        try:
            got = await bounded_get(
                self.client,
                self.base_url + path,
                max_bytes=INFO_MAX_BYTES,
                deadline_s=self.limits.timeout_s,
            )
            return loads_json(got.body) if got.status == 200 else None
        except (httpx.HTTPError, FetchTimeout, FetchTooLarge, ValueError):
            return None

    async def _server_info(self) -> tuple[int | None, tuple[str, ...], str | None]:
        """``max_model_len`` and model ids from ``/v1/models``, version from ``/version``."""
        if self._info is not None:
            return self._info
        models = await self._json("/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        entries = [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []
        ids = tuple(clean(m.get("id"), 300) for m in entries if m.get("id") is not None)
        lens = [m.get("max_model_len") for m in entries]
        max_len = next((x for x in lens if isinstance(x, int) and 0 < x <= MAX_MODEL_LEN), None)
        version = await self._json("/version")
        found = version.get("version") if isinstance(version, dict) else None
        self._info = (max_len, ids, clean(found, 64) if isinstance(found, str) else None)
        return self._info

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        body = await fetch_body(self.client, self.metrics_url, self.limits)
        cur = await asyncio.to_thread(parse_body, body, self.limits, self.table)
        self.detected = cur.detected
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


class DcgmReader:
    """A DCGM exporter's own ``/metrics`` (``--gpu-metrics URL``), read with the scrape's bounds."""

    def __init__(
        self,
        url: str,
        *,
        limits: ScrapeLimits | None = None,
        client: httpx.AsyncClient | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> None:
        self.url = url if url.rstrip("/").endswith("metrics") else url.rstrip("/") + "/metrics"
        self.description = self.url
        self.limits = limits or ScrapeLimits()
        self._own_client = client is None
        self.client = client or make_http_client(self.limits.timeout_s, ca_bundle, insecure)

    async def read(self) -> GpuReading:
        """The page's GPUs; a failed read is a quiet note (the server's scrape goes on)."""
        try:
            body = await fetch_body(self.client, self.url, self.limits)
            page = await asyncio.to_thread(parse_exposition, body, self.limits.max_series)
        except SourceError as exc:
            return GpuReading(note=f"GPU metrics: {exc.message}")
        except ExpositionError as exc:
            return GpuReading(note=f"GPU metrics: {self.url}: {exc}")
        gpus = dcgm_gpus(page)
        return GpuReading(gpus, None if gpus else f"no GPU data: no DCGM series at {self.url}")

    async def aclose(self) -> None:
        if self._own_client:
            await self.client.aclose()


class GpuReader(Protocol):
    description: str

    async def read(self) -> GpuReading: ...
    async def aclose(self) -> None: ...


def gpu_reader(spec: str | None, config: Config) -> GpuReader | None:
    """``--gpu-metrics``: ``nvml`` (this host's GPUs), a DCGM exporter URL, or None (off)."""
    if not spec:
        return None
    if spec.strip().lower() == "nvml":
        from infmon.sources.nvml import NvmlReader

        return NvmlReader()
    return DcgmReader(
        spec,
        limits=ScrapeLimits.from_config(config),
        ca_bundle=config.ca_bundle,
        insecure=config.insecure,
    )


class WithGpus:
    """A server source whose snapshots also carry a GPU source's reading (``gpus``), so the
    session, the journal's scrapes and the reports see both as one scrape."""

    def __init__(self, source: SnapshotSource, gpus: GpuReader) -> None:
        self.source = source
        self.gpus = gpus
        self.description = f"{source.description} + GPUs {gpus.description}"

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        snap = await self.source.snapshot(now_s)
        got = await self.gpus.read()
        return replace(
            snap,
            gpus=got.gpus or snap.gpus,
            gpu_source=self.gpus.description,
            gpu_note=None if got.gpus or snap.gpus else got.note,
        )

    async def aclose(self) -> None:
        try:
            await self.gpus.aclose()
        finally:
            await self.source.aclose()


def direct_source(config: Config, url: str, gpu_metrics: str | None = None) -> Any:
    """The run's server source, with ``--gpu-metrics`` (nvml or a DCGM URL) joined in."""
    source = DirectSource.from_config(config, url)
    reader = gpu_reader(gpu_metrics, config)
    return source if reader is None else WithGpus(source, reader)
