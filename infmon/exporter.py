"""infmon's own client figures in Prometheus format (``--metrics-port``), beside the servers'.

A fleet's Prometheus scrapes the load the way it scrapes vLLM, so one Grafana dashboard shows
what the clients measured next to what the servers say (``docs/grafana-infmon.json``). Fed on
the controller's loop from the records and windows the workers send (never on a load loop):
each batch of records is bucketed in one numpy pass; the HTTP thread of prometheus-client reads
a copy under a lock. Histograms use vLLM's own bucket boundaries (the same as ``vllm:time_to_
first_token_seconds``, ``vllm:inter_token_latency_seconds``, ``vllm:request_time_per_output_
token_seconds`` and ``vllm:e2e_request_latency_seconds``), so the same ``histogram_quantile``
query reads both sides. Only successful requests enter the latency histograms (as vLLM's).

Series: ``infmon_requests_total{outcome}`` (ok, failed, cancelled), ``infmon_request_errors_
total{kind}``, ``infmon_output_tokens_total`` (counted as chunks arrive), ``infmon_prompt_
tokens_total``, ``infmon_{ttft,tpot,itl,e2el}_seconds`` histograms, ``infmon_target_
concurrency`` / ``infmon_target_rate`` (the level, 0 when the other mode or paused),
``infmon_achieved_concurrency``, ``infmon_inflight_requests``, ``infmon_workers``,
``infmon_workers_lost_total``.

At the end of a bench, ``stop(linger_s)`` holds the final figures until the Prometheus that has
been scraping serves itself once more (at most one and a half of its scrape intervals, capped
by ``linger_s``): the requests of the last second are not lost between two scrapes.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from infmon.engine.types import RecordBatch
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.records.window import LoadWindow
from infmon.model.steps.span import CLOSED, RATE

FAILURE_KINDS: tuple[str, ...] = tuple(
    str(v)
    for k, v in vars(ErrorKind).items()
    if k.isupper() and isinstance(v, str) and v != ErrorKind.CANCELLED
)
"""Every kind a failed request can have: exported at zero before the first (Grafana's panel on
a clean run reads 0, not "No data")."""

E2EL_BUCKETS: tuple[float, ...] = (
    *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0),
    *(60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
)
TTFT_BUCKETS: tuple[float, ...] = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5),
    *(5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
ITL_BUCKETS: tuple[float, ...] = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0),
    *(7.5, 10.0, 20.0, 40.0, 80.0),
)
"""vLLM's boundaries (``vllm/v1/metrics/loggers.py``), as its ``/metrics`` page lists them."""

HISTOGRAMS = {
    "ttft": (TTFT_BUCKETS, "Time to first token (sent to first chunk with choices), seconds."),
    "tpot": (ITL_BUCKETS, "Time per output token per request, (E2EL-TTFT)/(tokens-1), seconds."),
    "itl": (ITL_BUCKETS, "Gaps between successive content chunks, seconds."),
    "e2el": (E2EL_BUCKETS, "End-to-end request latency (sent to last chunk), seconds."),
}


class _Hist:
    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = np.asarray(bounds)
        self.counts = np.zeros(len(bounds) + 1, dtype=np.int64)
        self.total = 0.0

    def add(self, values: np.ndarray) -> None:
        values = values[np.isfinite(values)]
        if values.size:
            # le buckets: a value equal to a bound falls in that bound's bucket
            idx = np.searchsorted(self.bounds, values, side="left")
            self.counts += np.bincount(idx, minlength=self.counts.size)
            self.total += float(values.sum())

    def family(self, name: str, doc: str) -> HistogramMetricFamily:
        cum = np.cumsum(self.counts).tolist()
        buckets = [(_le(b), float(c)) for b, c in zip(self.bounds.tolist(), cum, strict=False)]
        buckets.append(("+Inf", float(cum[-1])))
        return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=self.total)


def _le(bound: float) -> str:
    return repr(float(bound))


def latencies(records: list[RequestRecord]) -> dict[str, np.ndarray]:
    """TTFT, TPOT, E2EL per successful request and every ITL gap, as arrays."""
    ok = [r for r in records if r.ok and r.chunk_times_s]
    gaps = [np.diff(np.asarray(r.chunk_times_s)) for r in ok if len(r.chunk_times_s) > 1]
    return {
        "ttft": np.fromiter((r.ttft_s for r in ok), float, len(ok)),
        "tpot": np.fromiter((r.tpot_s for r in ok), float, len(ok)),
        "e2el": np.fromiter((r.e2el_s for r in ok), float, len(ok)),
        "itl": np.concatenate(gaps) if gaps else np.empty(0),
    }


class ClientExporter:
    """See the module docstring. ``level`` and ``workers`` are read when Prometheus scrapes."""

    def __init__(
        self,
        level: Callable[[], tuple[str, float] | None] = lambda: None,
        workers: Callable[[], int] = lambda: 1,
    ) -> None:
        self.level, self.workers = level, workers
        self._lock = threading.Lock()
        self._scraped = threading.Condition(self._lock)
        self._fed = 0
        """Feeds so far (records, windows, losses); ``_served``: as many as the last scrape saw."""
        self._served = 0
        self._scrape_times: list[float] = []
        """The monotonic times of the last two scrapes (their gap: Prometheus's interval)."""
        self._hists = {k: _Hist(b) for k, (b, _) in HISTOGRAMS.items()}
        self._outcomes: Counter[str] = Counter()
        self._errors: Counter[str] = Counter()
        self._output_tokens = 0.0
        self._prompt_tokens = 0
        self._lost = 0
        self._area: dict[int, tuple[float, float, int]] = {}
        """Per worker, its last window: (∫ inflight dt, length, in flight at its end)."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        self._server: Any = None
        self.address: tuple[str, int] | None = None

    # ---- fed on the controller's loop ----------------------------------------------------------
    def records(self, batch: RecordBatch) -> None:
        recs = batch.records
        values = latencies(recs)
        outcomes: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        prompt = 0
        for r in recs:
            if r.ok:
                outcomes["ok"] += 1
                prompt += r.prompt_tokens or 0
            elif r.error_kind == "cancelled":
                outcomes["cancelled"] += 1
            else:
                outcomes["failed"] += 1
                errors[r.error_kind or "other"] += 1
        with self._lock:
            for name, v in values.items():
                self._hists[name].add(v)
            self._outcomes.update(outcomes)
            self._errors.update(errors)
            self._prompt_tokens += prompt
            self._fed += 1

    def window(self, w: LoadWindow) -> None:
        with self._lock:
            self._output_tokens += w.tokens
            self._area[w.worker_id] = (w.inflight_area_s, w.t1 - w.t0, w.inflight)
            self._fed += 1

    def lost(self, worker_id: int) -> None:
        with self._lock:
            self._lost += 1
            self._area.pop(worker_id, None)
            self._fed += 1

    # ---- read on prometheus-client's thread ----------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            hists = {k: (h.counts.copy(), h.total, h.bounds) for k, h in self._hists.items()}
            outcomes, errors = dict(self._outcomes), dict(self._errors)
            out_tok, prompt_tok, lost = self._output_tokens, self._prompt_tokens, self._lost
            areas = list(self._area.values())
            self._served = self._fed
            self._scrape_times = [*self._scrape_times[-1:], time.monotonic()]
            self._scraped.notify_all()
        req = CounterMetricFamily(
            "infmon_requests", "Requests finished, by outcome.", None, ["outcome"]
        )
        for outcome in ("ok", "failed", "cancelled"):
            req.add_metric([outcome], float(outcomes.get(outcome, 0)))
        yield req
        err = CounterMetricFamily(
            "infmon_request_errors", "Failed requests by kind.", None, ["kind"]
        )
        for kind in sorted(set(errors) | set(FAILURE_KINDS)):  # zero until the first: not absent
            err.add_metric([kind], float(errors.get(kind, 0)))
        yield err
        yield CounterMetricFamily(
            "infmon_output_tokens", "Output tokens, counted as their chunks arrived.", out_tok
        )
        yield CounterMetricFamily(
            "infmon_prompt_tokens", "Prompt tokens of successful requests (usage).", prompt_tok
        )
        for name, (counts, total, bounds) in hists.items():
            h = _Hist(tuple(bounds.tolist()))
            h.counts, h.total = counts, total
            yield h.family(f"infmon_{name}_seconds", HISTOGRAMS[name][1])
        yield from self._gauges(areas, lost)

    def _gauges(self, areas: list[tuple[float, float, int]], lost: int) -> Iterator[Metric]:
        level = self.level()
        mode, value = level if level is not None else (CLOSED, 0.0)
        yield GaugeMetricFamily(
            "infmon_target_concurrency",
            "Target concurrency (closed loop; 0 otherwise).",
            value if mode == CLOSED else 0.0,
        )
        yield GaugeMetricFamily(
            "infmon_target_rate",
            "Target request rate, req/s (rate mode; 0 otherwise).",
            value if mode == RATE else 0.0,
        )
        achieved = sum(a / span for a, span, _ in areas if span > 0)
        yield GaugeMetricFamily(
            "infmon_achieved_concurrency", "Mean requests in flight over the last window.", achieved
        )
        yield GaugeMetricFamily(
            "infmon_inflight_requests", "Requests in flight now.", float(sum(n for *_, n in areas))
        )
        yield GaugeMetricFamily("infmon_workers", "Live load workers.", float(self.workers()))
        yield CounterMetricFamily("infmon_workers_lost", "Load workers lost.", float(lost))

    # ---- life ------------------------------------------------------------------------------------
    def start(self, host: str, port: int) -> tuple[str, int]:
        """Serve ``/metrics`` on ``host:port`` (port 0: any free one); returns the address."""
        server, _thread = start_http_server(port, host, registry=self.registry)
        self._server = server
        self.address = (host, int(server.server_address[1]))
        return self.address

    def stop(self, linger_s: float = 0.0) -> bool:
        """Stop serving. With ``linger_s``, first wait for a scrape that sees every figure fed
        so far, if a Prometheus has been scraping (see the module docstring); True when the
        last figures were scraped (or there was nothing new to scrape)."""
        seen = self._await_final_scrape(linger_s)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()  # joins the handler threads: the last page is sent
            self._server = None
        return seen

    def linger_bound_s(self, linger_s: float) -> float:
        """How long ``stop(linger_s)`` may wait: 0 if never scraped, else 2.5 scrape
        intervals (``linger_s`` when only one scrape was seen), capped by ``linger_s``: the
        next scrape is due within one, and a Prometheus on a busy host runs late (1.5 missed
        it beside a loaded test suite)."""
        with self._lock:
            times = list(self._scrape_times)
        if not times:
            return 0.0
        interval = times[1] - times[0] if len(times) == 2 else linger_s
        return min(linger_s, 2.5 * interval)

    def _await_final_scrape(self, linger_s: float) -> bool:
        bound = self.linger_bound_s(linger_s)
        deadline = time.monotonic() + bound
        with self._scraped:
            while self._served < self._fed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._scraped.wait(left)
        return True
