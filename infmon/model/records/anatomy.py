"""Where each request's time went: the client's E2E split by the server's own per-request view.

A request's E2E latency (sent → last chunk, on the client's clock) holds, in order:

- **front**: client TTFT − the server's (queue + prefill): the request's way in (network, the
  API server's parsing and tokenising) and the first token's way out. One clock is not shared
  by both ends, so the two directions cannot be told apart; together they are exact.
- **queue**: queued → first scheduled (the engine's ``queue_time_ms``).
- **prefill**: scheduled → first token (vLLM's ``time_to_first_token_ms``).
- **decode**: first → last token (``generation_time_ms``).
- **tail**: the client's decode span (last chunk − first chunk) − the server's: how much later
  the last token reached the client than the first did, beyond the engine's own time.

front + tail is the **client-side share**: time the server's engine did not see. The parts add
up to E2E by construction; what the split tests is causality (no part of the server's span may
exceed what the client saw) and units. A client-side share that grows with load says the client
or the network is the bottleneck, not the server. TPOT is set beside the server's mean ITL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord
from infmon.model.records.server_timing import ServerColumns

PARTS = ("front", "queue", "prefill", "decode", "tail")
"""The parts of E2E, in the order a request lives them."""
PART_LABELS = {
    "front": "to server & first token back",
    "queue": "queue",
    "prefill": "prefill",
    "decode": "decode",
    "tail": "stream delivery lag",
}
TOP_UNEXPLAINED = 5
"""Requests listed with the largest client-side share."""
GROWTH_FACTOR = 2.0
"""The client-side share's median at the highest load over the lowest's, above which ..."""
GROWTH_MIN_MS = 5.0
"""... and by at least this much (ms), the self-check says the client or network limits."""


@dataclass(frozen=True, slots=True)
class Quantiles:
    p50_ms: float
    p90_ms: float


@dataclass(frozen=True, slots=True)
class Unexplained:
    """One request whose time the server's engine did not see."""

    request_id: int
    e2e_ms: float
    client_ms: float

    @property
    def share(self) -> float:
        return self.client_ms / self.e2e_ms if self.e2e_ms > 0 else math.nan


@dataclass(frozen=True, slots=True)
class Anatomy:
    """One step's (or window's) latency anatomy over the requests the server described."""

    requests: int
    """Successful requests that carried the server's figures."""
    without: int
    """Successful requests without them (another server, or the server's flag off)."""
    parts: tuple[tuple[str, Quantiles], ...]
    """Each of ``PARTS`` with its p50 and p90 (ms)."""
    client: Quantiles
    """The client-side share (front + tail), ms."""
    client_fraction_p50: float
    """Median of client-side share / E2E."""
    e2e: Quantiles
    tpot_p50_ms: float
    server_itl_p50_ms: float
    negative: int
    """Requests where the server's span exceeds the client's by over 1 ms (clock or units)."""
    top: tuple[Unexplained, ...] = ()
    front_mean_ms: float = math.nan
    engine_ttft_mean_ms: float = math.nan
    """Means of the front and of the engine's queued → first token (queue + prefill): a
    histogram's mean of the server's TTFT splits the front's mean at it (``FrontSplit``)."""

    def part(self, name: str) -> Quantiles:
        return dict(self.parts)[name]


@dataclass(frozen=True, slots=True)
class Split:
    """Per-request arrays (ms) of every part; rows are requests with server figures."""

    request_id: np.ndarray
    e2e: np.ndarray
    front: np.ndarray
    queue: np.ndarray
    prefill: np.ndarray
    decode: np.ndarray
    tail: np.ndarray
    tpot: np.ndarray
    server_itl: np.ndarray
    without: int

    @property
    def client(self) -> np.ndarray:
        return np.asarray(self.front + self.tail)


def split_columns(cols: RecordColumns) -> Split:
    """Every successful request's split (those without server figures are only counted)."""
    srv = cols.server if cols.server is not None else ServerColumns.empty(len(cols))
    ok = cols.ok & (cols.chunks > 0)
    has = ok & ~np.isnan(srv.queue_ms) & ~np.isnan(srv.prefill_ms) & ~np.isnan(srv.decode_ms)
    ttft = cols.ttft_s[has] * 1e3
    e2e = cols.e2el_s[has] * 1e3
    queue, prefill, decode = srv.queue_ms[has], srv.prefill_ms[has], srv.decode_ms[has]
    return Split(
        request_id=cols.request_id[has],
        e2e=e2e,
        front=ttft - (queue + prefill),
        queue=queue,
        prefill=prefill,
        decode=decode,
        tail=(e2e - ttft) - decode,
        tpot=cols.tpot_s[has] * 1e3,
        server_itl=srv.mean_itl_ms[has],
        without=int((ok & ~has).sum()),
    )


def split_records(records: Sequence[RequestRecord]) -> Split:
    return split_columns(RecordColumns.from_records(records))


def _q(values: np.ndarray) -> Quantiles:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return Quantiles(math.nan, math.nan)
    p50, p90 = np.percentile(finite, [50, 90])
    return Quantiles(float(p50), float(p90))


def _median(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else math.nan


def anatomy(s: Split, top: int = TOP_UNEXPLAINED) -> Anatomy | None:
    """The split's quantiles; None when no request carried the server's figures."""
    if not s.e2e.size:
        return None
    client = s.client
    order = np.argsort(-client, kind="stable")[:top]
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(s.e2e > 0, client / s.e2e, np.nan)
    server_span = s.queue + s.prefill + s.decode
    return Anatomy(
        requests=int(s.e2e.size),
        without=s.without,
        parts=tuple((name, _q(getattr(s, name))) for name in PARTS),
        client=_q(client),
        client_fraction_p50=_median(fraction),
        e2e=_q(s.e2e),
        tpot_p50_ms=_median(s.tpot),
        server_itl_p50_ms=_median(s.server_itl),
        negative=int((server_span > s.e2e + 1.0).sum()),
        top=tuple(
            Unexplained(int(s.request_id[i]), float(s.e2e[i]), float(client[i])) for i in order
        ),
        front_mean_ms=_mean(s.front),
        engine_ttft_mean_ms=_mean(s.queue + s.prefill),
    )


def _mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else math.nan


@dataclass(frozen=True, slots=True)
class FrontSplit:
    """A step's front (means, ms) split at the server's own TTFT histogram. vLLM times that
    in its API server, from the prompt's rendering (before tokenising) to the first token into
    its output loop, so less the engine's queued → first token it is the API server's part
    (tokenising, the trip to the engine core, the wait for the step under way, the way back);
    the rest is outside it (the HTTP request before the stamp, the SSE write, the network and
    the client). The histogram's requests are those of the scrape windows inside the step, the
    anatomy's those the step measured: one load, not one set of requests."""

    api_server_ms: float
    outside_ms: float


def front_split(a: Anatomy, server_ttft_ms: float) -> FrontSplit | None:
    """The split, when the step has both means (None without the histogram's)."""
    if not (math.isfinite(server_ttft_ms) and math.isfinite(a.front_mean_ms)):
        return None
    if not math.isfinite(a.engine_ttft_mean_ms):
        return None
    api = server_ttft_ms - a.engine_ttft_mean_ms
    return FrontSplit(api, a.front_mean_ms - api)


def anatomy_of_columns(cols: RecordColumns) -> Anatomy | None:
    return anatomy(split_columns(cols))


def anatomy_of_records(records: Sequence[RequestRecord]) -> Anatomy | None:
    return anatomy(split_records(records))


@dataclass(frozen=True, slots=True)
class ClientGrowth:
    """The self-check: the client-side share grew with load (the client or network limits)."""

    low_load: float
    high_load: float
    low_ms: float
    high_ms: float
    low_split: FrontSplit | None = None
    high_split: FrontSplit | None = None
    """The front's split at both loads, when the server published its TTFT histogram."""

    @property
    def in_api_server(self) -> bool:
        """The front grew more inside the server's API process than outside it."""
        lo, hi = self.low_split, self.high_split
        if lo is None or hi is None:
            return False
        return hi.api_server_ms - lo.api_server_ms > hi.outside_ms - lo.outside_ms

    def text(self) -> str:
        grew = (
            f"client-side share grows with load: median {self.low_ms:.1f} ms at "
            f"{self.low_load:g} → {self.high_ms:.1f} ms at {self.high_load:g}"
        )
        lo, hi = self.low_split, self.high_split
        if lo is None or hi is None:
            return (
                f"{grew} while the server's own times do not explain it: the client or the "
                "network is the bottleneck, not the server"
            )
        parts = (
            f"the server's TTFT histogram less its engine's queued → first token went "
            f"{lo.api_server_ms:.1f} → {hi.api_server_ms:.1f} ms (means), the rest "
            f"{lo.outside_ms:.1f} → {hi.outside_ms:.1f} ms"
        )
        if self.in_api_server:
            return (
                f"{grew}, mostly inside the server's API process: {parts}. Its API server "
                "(tokenising, the trip to the engine and back, its event loop) is the "
                "bottleneck, not the client or the network"
            )
        return f"{grew} outside the server ({parts}): the client or the network is the bottleneck"

    def short(self) -> str:
        """The conclusion first, for a narrow pane (the monitor's anatomy view)."""
        loads = f"({self.low_load:g} → {self.high_load:g})"
        client = f"client-side {self.low_ms:.1f} → {self.high_ms:.1f} ms {loads}"
        lo, hi = self.low_split, self.high_split
        if lo is None or hi is None:
            return f"client or network limits: {client}"
        part = f"part {lo.api_server_ms:.1f} → {hi.api_server_ms:.1f} ms"
        if self.in_api_server:
            return f"API server limits: its {part}, {client}"
        return f"client or network limits: {client}, the API server's {part}"


def client_growth(
    by_load: Sequence[tuple[float, Anatomy]], server_ttft_ms: Sequence[float] = ()
) -> ClientGrowth | None:
    """Compare the lowest and the highest load's client-side share (median, ms);
    ``server_ttft_ms``, one per ``by_load`` (nan: none), splits the front at both ends."""
    ttft = list(server_ttft_ms) or [math.nan] * len(by_load)
    points = sorted(
        (
            (load, a, t)
            for (load, a), t in zip(by_load, ttft, strict=True)
            if math.isfinite(a.client.p50_ms)
        ),
        key=lambda p: p[0],
    )  # by load alone: two steps at one load (a revisit) have no order of their own
    if len(points) < 2:
        return None
    (lo, a_lo, t_lo), (hi, a_hi, t_hi) = points[0], points[-1]
    if hi <= lo:
        return None
    low, high = max(a_lo.client.p50_ms, 0.0), a_hi.client.p50_ms
    if high - low >= GROWTH_MIN_MS and high >= GROWTH_FACTOR * max(low, 1.0):
        return ClientGrowth(lo, hi, low, high, front_split(a_lo, t_lo), front_split(a_hi, t_hi))
    return None


def per_request_line(on: bool) -> str:
    """What the probe found, for the run's intro."""
    if on:
        return "server timings: per request (queue, prefill, decode joined to each stream)"
    # the intro fits 100 columns like bench's table (issue 17 finding 8)
    return "server timings: not sent (vLLM's --enable-per-request-metrics sends them per request)"
