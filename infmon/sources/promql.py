"""The Prometheus server source: a whole fleet (every pod matching a selector) through PromQL.

Prometheus does the aggregation: instant series give the canonical totals and gauges (summed
for the fleet, one row per pod), ``rate`` / ``histogram_quantile`` / ``sum by`` give rates and
latency quantiles over ``window_s``. With ``window_s=None`` the latency statistics are since the
servers started (the same as one direct scrape), so both sources can be compared number for
number.

Bounded like the direct source: every answer is read up to a size cap, one snapshot (all its
queries) has a total deadline, a fleet with more series than the cap is rejected, and label
names and values are sanitised. Certificates are verified unless ``insecure``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import requests
from prometheus_api_client import PrometheusConnect
from requests.adapters import HTTPAdapter

from infmon.model.server.gpu import GpuSnapshot
from infmon.model.server.snapshot import (
    LATENCY_NAMES,
    EngineSnapshot,
    ServerSnapshot,
    WindowStat,
)
from infmon.net import TLSConfigError, requests_verify
from infmon.sources.backends import detect, table_named
from infmon.sources.backends.table import BackendTable
from infmon.sources.canonical import snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import MAX_SERIES, Sample, clean_labels, page_from_samples
from infmon.sources.gpu import dcgm_gpus, gpus_of_pods, promql_regex
from infmon.sources.readings import read_page

_PREFIXES = ("vllm:", "sglang:", "tgi_", "llamacpp:")
_DCGM = "DCGM_FI_.+"


def selector_matchers(selector: str) -> str:
    """``{a="b", c=~"d"}`` or ``a="b"`` → ``a="b", c=~"d"`` (the inside of the braces)."""
    inner = selector.strip()
    if inner.startswith("{") and inner.endswith("}"):
        inner = inner[1:-1]
    return inner.strip().rstrip(",")


class _AnswerTimeout(Exception):
    pass


class _AnswerTooLarge(Exception):
    pass


class BoundedAdapter(HTTPAdapter):
    """``requests`` transport that reads each answer up to ``max_bytes`` and gives up at
    ``deadline`` (monotonic; checked between reads, each read also timing out), without retries:
    prometheus-api-client reads whole bodies with no bound and retries for seconds."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_retries=0)
        self.max_bytes = max_bytes
        self.deadline = math.inf

    def send(self, request: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise _AnswerTimeout()
        kwargs["stream"] = True
        kwargs["timeout"] = (min(left, 30.0), min(left, 30.0))
        resp = super().send(request, **kwargs)
        parts, size = [], 0
        try:
            for chunk in _chunks(resp.raw):
                parts.append(chunk)
                size += len(chunk)
                if size > self.max_bytes:
                    raise _AnswerTooLarge()
                if time.monotonic() > self.deadline:
                    raise _AnswerTimeout()
        except BaseException:
            resp.close()
            raise
        resp._content = b"".join(parts)
        resp._content_consumed = True
        return resp


def _chunks(raw: Any) -> Iterator[bytes]:
    """The body as it arrives: ``read1`` returns what one read got (``read(n)`` would wait for
    all n bytes, and a server dripping a byte a second would never be timed out)."""
    read1 = getattr(raw, "read1", None)
    if read1 is None:  # urllib3 1.x
        yield from raw.stream(64 * 1024, decode_content=True)
        return
    while chunk := read1(64 * 1024, decode_content=True):  # gzip from Prometheus: decoded
        yield chunk


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
        max_bytes: int = 16 * 1024 * 1024,
        max_series: int = MAX_SERIES,
        ca_bundle: str | None = None,
        insecure: bool = False,
    ) -> None:
        self.url = url.rstrip("/")
        self.matchers = selector_matchers(selector)
        self.description = f"{self.url} {{{self.matchers}}}"
        self.table: BackendTable | None = table_named(backend) if backend else None
        self.window_s = window_s
        self.max_series = max_series
        try:
            verify = requests_verify(ca_bundle, insecure)
        except TLSConfigError as exc:
            raise SourceError(SourceError.OTHER, str(exc)) from None
        self._prom = PrometheusConnect(url=self.url, disable_ssl=insecure, timeout=timeout_s)
        self._prom._session.verify = verify
        self._adapter = BoundedAdapter(max_bytes)
        self._prom._session.mount(self.url, self._adapter)  # replaces the library's retrying one
        self._timeout_s = timeout_s
        self._max_bytes = max_bytes

    def _sel(self, name: str) -> str:
        return f"{name}{{{self.matchers}}}"

    def query(self, promql: str) -> list[dict[str, Any]]:
        """One instant query (blocking); failures become ``SourceError``."""
        try:
            result = self._prom.custom_query(promql)
            return [r for r in result if isinstance(r, dict)] if isinstance(result, list) else []
        except _AnswerTimeout:
            raise SourceError(
                SourceError.TIMEOUT, f"{self.url}: no complete answer within {self._timeout_s:g} s"
            ) from None
        except _AnswerTooLarge:
            raise SourceError(
                SourceError.TOO_LARGE,
                f"{self.url}: answer over {self._max_bytes:,} bytes (--metrics-max-bytes)",
            ) from None
        except requests.exceptions.ConnectionError as exc:  # TLS failures included
            raise SourceError(
                SourceError.CONNECT, f"{self.url}: cannot connect ({_root_cause(exc)})"
            ) from None
        except requests.exceptions.Timeout:
            raise SourceError(
                SourceError.TIMEOUT, f"{self.url}: no answer within {self._timeout_s:g} s"
            ) from None
        except Exception as exc:
            msg = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            raise SourceError(SourceError.PROMETHEUS, f"{self.url}: {msg}") from None

    def scalar(self, promql: str) -> float | None:
        """The single value of an aggregated query; None when empty or NaN."""
        result = self.query(promql)
        if not result:
            return None
        value = _value(result[0])
        return None if value is None or math.isnan(value) or math.isinf(value) else value

    def instances(self) -> list[str]:
        """The ``instance`` label of every target of ``up{selector}`` (blocking, bounded)."""
        self._adapter.deadline = time.monotonic() + self._timeout_s
        try:
            found = self.query(self._sel("up"))
        finally:
            self._adapter.deadline = math.inf
        out = []
        for item in found[: self.max_series]:
            metric = item.get("metric")
            if isinstance(metric, dict) and isinstance(metric.get("instance"), str):
                out.append(clean_labels({"instance": metric["instance"]})["instance"])
        return sorted(set(out))

    def _series(self, promql: str) -> list[Sample]:
        series = self.query(promql)
        if len(series) > self.max_series:
            raise SourceError(
                SourceError.TOO_MANY_SERIES,
                f"{self.url}: {len(series):,} series, over the cap of {self.max_series:,} "
                "(--metrics-max-series)",
            )
        samples = []
        for item in series:
            metric, value = item.get("metric"), _value(item)
            if not isinstance(metric, dict) or value is None:
                continue
            labels = clean_labels({str(k): str(v) for k, v in metric.items()})
            name = labels.pop("__name__", None)
            if name is not None:
                samples.append(Sample(name, labels, value))
        return samples

    def _raw_page(self) -> tuple[list[Sample], str]:
        names = "|".join(p + ".+" for p in _PREFIXES)
        extra = f", {self.matchers}" if self.matchers else ""
        samples = self._series(f'{{__name__=~"{names}"{extra}}}')
        pod_label = "pod" if any("pod" in s.labels for s in samples) else "instance"
        return samples, pod_label

    def _gpus(
        self, samples: list[Sample]
    ) -> tuple[tuple[GpuSnapshot, ...], dict[str, tuple[str, ...]]]:
        """The DCGM series of the fleet's GPUs (those its pods hold, else those of its hosts),
        with every other pod on them; and each pod's GPUs. Not filtered by the selector: a
        neighbour on the same GPU is in another namespace."""
        pods: dict[str, str] = {}
        for s in samples:
            if s.labels.get("pod"):
                host = s.labels.get("instance", "").rsplit(":", 1)[0]
                pods.setdefault(s.labels["pod"], host)
        hosts = {s.labels.get("instance", "").rsplit(":", 1)[0] for s in samples} - {""}
        found = (
            self._series(f'{{__name__=~"{_DCGM}", pod=~"{promql_regex(pods)}"}}') if pods else []
        )
        uuids = {s.labels["UUID"] for s in found if s.labels.get("UUID")}
        if uuids:
            found = self._series(f'{{__name__=~"{_DCGM}", UUID=~"{promql_regex(uuids)}"}}')
        elif hosts:
            rx = promql_regex(hosts)
            found = self._series(f'{{__name__=~"{_DCGM}", Hostname=~"{rx}"}}')
            found += self._series(f'{{__name__=~"{_DCGM}", hostname=~"{rx}"}}')
        gpus = dcgm_gpus(page_from_samples(found))
        return gpus, gpus_of_pods(gpus, pods)

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

    def _by_pod(self, names: tuple[str, ...], pod_label: str) -> dict[str, float]:
        """``sum by (pod) (rate(name[window]))`` of the first name that has series."""
        assert self.window_s is not None
        for name in names:
            got = self.query(
                f"sum by ({pod_label}) (rate({self._sel(name)}[{_duration(self.window_s)}]))"
            )
            out = {}
            for item in got[: self.max_series]:
                metric, value = item.get("metric"), _value(item)
                if isinstance(metric, dict) and value is not None and math.isfinite(value):
                    pod = clean_labels({"p": str(metric.get(pod_label, ""))})["p"]
                    out[pod] = value
            if out:
                return out
        return {}

    def _pod_rates(
        self,
        engines: tuple[EngineSnapshot, ...],
        pod_label: str,
        counters: Mapping[str, tuple[str, ...]],
    ) -> tuple[EngineSnapshot, ...]:
        """Each pod's prompt and generation tokens/s over the window (Prometheus's ``rate``)."""
        if self.window_s is None or not engines:
            return engines
        gen = self._by_pod(tuple(counters.get("generation_tokens", ())), pod_label)
        prompt = self._by_pod(tuple(counters.get("prompt_tokens", ())), pod_label)
        out = []
        for e in engines:
            pod = dict(e.labels).get(pod_label)
            out.append(
                replace(
                    e,
                    generation_tokens_per_s=gen.get(pod) if pod is not None else None,
                    prompt_tokens_per_s=prompt.get(pod) if pod is not None else None,
                )
            )
        return tuple(out)

    def snapshot_sync(self, now_s: float) -> ServerSnapshot:
        """One snapshot: every query it makes shares one deadline (``timeout_s``)."""
        self._adapter.deadline = time.monotonic() + self._timeout_s
        try:
            return self._snapshot(now_s)
        finally:
            self._adapter.deadline = math.inf

    def _snapshot(self, now_s: float) -> ServerSnapshot:
        samples, pod_label = self._raw_page()
        page = page_from_samples(samples)
        table = self.table or detect(page)
        readings = read_page(page, table, group_by=(pod_label,))
        snap = snapshot_from(readings, timestamp_s=now_s)
        gpus, by_pod = self._gpus(samples)
        engines = tuple(
            replace(e, gpus=by_pod.get(dict(e.labels).get("pod", ""), ())) for e in snap.engines
        )
        snap = replace(snap, gpus=gpus, engines=engines)
        if table is None:
            return snap
        latency = {}
        for concept in LATENCY_NAMES:
            for base in table.histograms.get(concept, ()):
                if page.has(base + "_count") or page.has(base + "_bucket"):
                    latency[concept] = self._latency(base)
                    break
        c = table.counters
        engines = self._pod_rates(snap.engines, pod_label, c)
        return replace(
            snap,
            engines=engines,
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


def _root_cause(exc: BaseException) -> str:
    """The innermost reason of a requests/urllib3 error (e.g. the certificate check), one line."""
    for _ in range(8):
        arg = exc.args[0] if exc.args else None
        inner = getattr(exc, "reason", None) or (arg if isinstance(arg, BaseException) else None)
        inner = inner or exc.__cause__ or exc.__context__
        if not isinstance(inner, BaseException):
            break
        exc = inner
    return " ".join(str(exc).split())[:200] or type(exc).__name__


def _value(item: dict[str, Any]) -> float | None:
    """The number of an instant-vector element (``"value": [time, "1.5"]``), None if odd."""
    try:
        return float(item["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _duration(seconds: float) -> str:
    """A PromQL range duration in milliseconds (exact for fractional windows)."""
    return f"{max(1, round(seconds * 1000))}ms"
