"""Several servers' own ``/metrics``, read together as one fleet (``--url`` given more than once).

Each endpoint's page is fetched (concurrently, each bounded as a direct scrape is) and its
samples get an ``endpoint`` label (``host:port``); the pages then read as one page grouped by
that label, as a Prometheus reads pods: the snapshot's totals are the fleet's (running, waiting
and tokens summed, KV usage the mean, histograms added bucket by bucket) and its ``engines`` are
one row per endpoint, with that endpoint's rates over the poll interval. An endpoint whose
scrape failed is left out of both pages behind a window (its counters would otherwise count
from zero when it answers again); the fleet is down only when every endpoint is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from urllib.parse import urlsplit

from infmon.config import Config
from infmon.model.server.snapshot import ServerSnapshot
from infmon.sources.backends import table_named
from infmon.sources.canonical import snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import (
    Sample,
    page_from_samples,
)
from infmon.sources.readings import Readings, read_page
from infmon.sources.scraper import (
    DirectSource,
    ScrapeLimits,
    fetch_body,
    make_http_client,
    parse_page,
    split_url,
)

ENDPOINT_LABEL = "endpoint"


def endpoint_name(url: str) -> str:
    """``http://10.0.0.5:8000`` → ``10.0.0.5:8000`` (the row's name)."""
    return urlsplit(url).netloc or url


class FleetSource:
    """See the module docstring."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        limits: ScrapeLimits | None = None,
        backend: str | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> None:
        self.limits = limits or ScrapeLimits()
        self.metrics_urls = [split_url(u)[1] for u in urls]
        self.names = [endpoint_name(split_url(u)[0]) for u in urls]
        self.description = ", ".join(self.metrics_urls)
        self.client = make_http_client(self.limits.timeout_s, ca_bundle, insecure)
        self.table = table_named(backend) if backend else None
        self._info = DirectSource(urls[0], client=self.client, limits=self.limits)
        self._prev: tuple[float, dict[str, list[Sample]]] | None = None
        self.failed: dict[str, str] = {}
        """Endpoints whose last scrape failed, with the reason."""

    @classmethod
    def from_config(cls, config: Config, urls: Sequence[str]) -> FleetSource:
        return cls(
            urls,
            limits=ScrapeLimits.from_config(config),
            ca_bundle=config.ca_bundle,
            insecure=config.insecure,
        )

    async def _one(self, metrics_url: str, name: str) -> list[Sample]:
        body = await fetch_body(self.client, metrics_url, self.limits)
        page = await asyncio.to_thread(parse_page, body, self.limits)
        return [
            Sample(s.name, {**s.labels, ENDPOINT_LABEL: name}, s.value)
            for samples in page.by_name.values()
            for s in samples
        ]

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        got = await asyncio.gather(
            *(self._one(u, n) for u, n in zip(self.metrics_urls, self.names, strict=True)),
            return_exceptions=True,
        )
        pages: dict[str, list[Sample]] = {}
        errors: list[SourceError] = []
        self.failed = {}
        for name, result in zip(self.names, got, strict=True):
            if isinstance(result, SourceError):
                errors.append(result)
                self.failed[name] = result.message
            elif isinstance(result, BaseException):
                raise result
            else:
                pages[name] = result
        if not pages:
            raise errors[0]
        prev, self._prev = self._prev, (now_s, pages)
        common = [n for n in pages if prev is None or n in prev[1]]
        cur = self._read(pages, common if prev is not None else list(pages))
        before = self._read(prev[1], common) if prev is not None else None
        max_len, ids, version = await self._info._server_info()
        snap = snapshot_from(
            cur,
            before,
            timestamp_s=now_s,
            window_s=now_s - prev[0] if prev is not None else None,
            max_model_len=max_len,
            served_models=ids,
        )
        if version and snap.backend and snap.backend.startswith("vllm"):
            snap = replace(snap, backend_version=version)
        return snap

    def _read(self, pages: dict[str, list[Sample]], names: list[str]) -> Readings:
        page = page_from_samples(s for n in names for s in pages[n])
        return read_page(page, self.table, group_by=(ENDPOINT_LABEL,))

    async def aclose(self) -> None:
        await self.client.aclose()
