"""The Prometheus server source: a whole fleet (every pod matching a selector) through PromQL.

Prometheus does the aggregation: instant series give the canonical totals and gauges (summed
for the fleet, one row per pod), ``rate`` / ``histogram_quantile`` / ``sum by`` give rates and
latency quantiles over ``window_s``. With ``window_s=None`` the latency statistics are since the
servers started (the same as one direct scrape), so both sources can be compared number for
number.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace

from prometheus_api_client import PrometheusConnect

from infmon.model.server import LATENCY_NAMES, ServerSnapshot, WindowStat
from infmon.sources.backends import detect, table_named
from infmon.sources.backends.table import BackendTable
from infmon.sources.canonical import read_page, snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import Sample, page_from_samples

_PREFIXES = ("vllm:", "sglang:", "tgi_", "llamacpp:", "DCGM_FI_")


def selector_matchers(selector: str) -> str:
    """``{a="b", c=~"d"}`` or ``a="b"`` → ``a="b", c=~"d"`` (the inside of the braces)."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    return inner.strip().rstrip(",")


class PrometheusSource:
    """Canonical snapshots of every server matching ``selector`` on a Prometheus server."""

    def __init__(
        self,
        url: str,
        selector: str = "",
        *,
        backend: str | None = None,
        window_s: float | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.matchers = selector_matchers(selector)
        self.description = f"{self.url} {{{self.matchers}}}"
        self.table: BackendTable | None = table_named(backend) if backend else None
        self.window_s = window_s
        self._prom = PrometheusConnect(url=self.url, disable_ssl=True, timeout=int(timeout_s))
        self._timeout_s = timeout_s

    def _sel(self, name: str) -> str:
        return f"{name}{{{self.matchers}}}"

    def query(self, promql: str) -> list[dict]:
        """One instant query (blocking); failures become ``SourceError``."""
        try:
            return list(self._prom.custom_query(promql))
        except Exception as exc:
            msg = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise SourceError(SourceError.PROMETHEUS, f"{self.url}: {msg}") from None

    def scalar(self, promql: str) -> float | None:
        """The single value of an aggregated query; None when empty or NaN."""
        result = self.query(promql)
        if not result:
            return None
        value = float(result[0]["value"][1])
        return None if math.isnan(value) or math.isinf(value) else value

    def _raw_page(self) -> tuple[list[Sample], str]:
        names = "|".join(p + ".+" for p in _PREFIXES)
        extra = f", {self.matchers}" if self.matchers else ""
        series = self.query(f'{{__name__=~"{names}"{extra}}}')
        samples = []
        for item in series:
            labels = dict(item["metric"])
            name = labels.pop("__name__")
            samples.append(Sample(name, labels, float(item["value"][1])))
        pod_label = "pod" if any("pod" in s.labels for s in samples) else "instance"
        return samples, pod_label

    def _latency(self, base: str) -> WindowStat:
        w = self.window_s
        bucket, total, count = (self._sel(base + s) for s in ("_bucket", "_sum", "_count"))
        if w is not None:
            rng = f"[{_duration(w)}]"
            bucket, total, count = (f"rate({x}{rng})" for x in (bucket, total, count))
            n = self.scalar(f"sum(increase({self._sel(base + '_count')}[{_duration(w)}]))")
        else:
            n = self.scalar(f"sum({count})")
        qs = [
            self.scalar(f"histogram_quantile({q}, sum by (le) ({bucket}))")
            for q in (0.5, 0.9, 0.99)
        ]
        mean = self.scalar(f"sum({total}) / sum({count})")
        return WindowStat(count=n, mean=mean, p50=qs[0], p90=qs[1], p99=qs[2])

    def _rate(self, names: tuple[str, ...]) -> float | None:
        if self.window_s is None:
            return None
        for name in names:
            v = self.scalar(f"sum(rate({self._sel(name)}[{_duration(self.window_s)}]))")
            if v is not None:
                return v
        return None

    def snapshot_sync(self, now_s: float) -> ServerSnapshot:
        samples, pod_label = self._raw_page()
        page = page_from_samples(samples)
        table = self.table or detect(page)
        readings = read_page(page, table, group_by=(pod_label,))
        snap = snapshot_from(readings, timestamp_s=now_s)
        if table is None:
            return snap
        latency = {}
        for concept in LATENCY_NAMES:
            for base in table.histograms.get(concept, ()):
                if page.has(base + "_count") or page.has(base + "_bucket"):
                    latency[concept] = self._latency(base)
                    break
        c = table.counters
        return replace(
            snap,
            latency_s=latency or snap.latency_s,
            window_s=self.window_s,
            prompt_tokens_per_s=self._rate(c.get("prompt_tokens", ())),
            generation_tokens_per_s=self._rate(c.get("generation_tokens", ())),
            preemptions_per_s=self._rate(c.get("preemptions", ())),
            requests_finished_per_s=self._rate(tuple(n for n, _ in table.finished)),
        )

    async def snapshot(self, now_s: float) -> ServerSnapshot:
        return await asyncio.to_thread(self.snapshot_sync, now_s)

    async def aclose(self) -> None:
        self._prom._session.close()


def _duration(seconds: float) -> str:
    """A PromQL range duration in milliseconds (exact for fractional windows)."""
    return f"{max(1, round(seconds * 1000))}ms"
