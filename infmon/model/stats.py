"""Step statistics with exactly the definitions of ``vllm bench serve`` (DESIGN.md section 2).

TTFT, E2EL over successful requests; TPOT = (E2EL − TTFT) / (output_tokens − 1) over successful
requests with more than one output token; ITL pooled over every gap between content chunks;
throughputs over the step's measured duration; goodput = requests/s meeting every SLO bound
(a request with one output token has no TPOT and meets the TPOT bound, as in vLLM). Percentiles
are ``numpy.percentile`` (linear). Warm-up records are excluded. Missing values are ``nan``.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infmon.model.records import ErrorKind, RequestRecord

PERCENTILES = (50, 90, 95, 99)
CLIENT_LAG_LIMIT_S = 0.05
"""Event-loop lag p99 above which the client's own timestamps are suspect."""
ACHIEVED_FRACTION = 0.9
"""Below this fraction of the target load, the client (not the server) may be the limit."""
SEND_LATE_LIMIT_S = 0.005
"""Trace/schedule sends later than this at p99: the replay's timing is off."""
PROMPT_MISMATCH_FRACTION = 0.02
"""Server-counted prompt tokens off the requested ones by more than this: a diagnosis line."""


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objective: a request is "good" when every given bound holds."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2el_s: float | None = None

    @property
    def empty(self) -> bool:
        return self.ttft_s is None and self.tpot_s is None and self.e2el_s is None

    def to_dict(self) -> dict[str, float | None]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "e2el_s": self.e2el_s}


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of one latency in seconds."""

    count: int
    mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values_s: Sequence[float] | np.ndarray) -> Distribution:
        a = np.asarray(values_s, dtype=float)
        a = a[~np.isnan(a)]
        if a.size == 0:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan)
        p = np.percentile(a, PERCENTILES)
        return cls(
            int(a.size),
            float(a.mean()),
            float(p[0]),
            float(p[1]),
            float(p[2]),
            float(p[3]),
            float(a.max()),
        )

    def to_ms_dict(self) -> dict[str, float | None]:
        keys = ("mean", "p50", "p90", "p95", "p99", "max")
        return {k: _json_num(getattr(self, k) * 1e3) for k in keys}


@dataclass(frozen=True, slots=True)
class PromptTokens:
    """Prompt lengths of a step's successful requests: as asked for, and as the server
    counted them (``usage.prompt_tokens``), over the requests that have both."""

    count: int
    requested_mean: float
    counted_mean: float
    counted_p50: float
    counted_p99: float

    @classmethod
    def of(cls, records: Sequence[RequestRecord]) -> PromptTokens:
        pairs = [
            (r.prompt_tokens_requested, r.prompt_tokens)
            for r in records
            if r.prompt_tokens_requested is not None and r.prompt_tokens is not None
        ]
        if not pairs:
            nan = math.nan
            return cls(0, nan, nan, nan, nan)
        req = np.array([a for a, _ in pairs], dtype=float)
        got = np.array([b for _, b in pairs], dtype=float)
        p50, p99 = np.percentile(got, (50, 99))
        return cls(len(pairs), float(req.mean()), float(got.mean()), float(p50), float(p99))

    @property
    def mismatch(self) -> float:
        """(counted − requested) / requested of the means; nan when unknown."""
        if not self.count or not self.requested_mean > 0:
            return math.nan
        return (self.counted_mean - self.requested_mean) / self.requested_mean

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "count": self.count,
            "requested_mean": _json_num(self.requested_mean),
            "counted_mean": _json_num(self.counted_mean),
            "counted_p50": _json_num(self.counted_p50),
            "counted_p99": _json_num(self.counted_p99),
            "mismatch": _json_num(self.mismatch),
        }


@dataclass(frozen=True, slots=True)
class StepStats:
    """One step's numbers; ``to_dict()`` is one ``steps[]`` entry of the bench JSON."""

    concurrency: int | None
    rate: float | None
    duration_s: float
    completed: int
    failed: int
    cancelled: int
    warmup_excluded: int
    output_tokens: int
    prompt_tokens: int | None
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    request_throughput_req_s: float
    goodput_req_s: float
    slo_attainment: float
    error_rate: float
    errors_by_kind: tuple[tuple[str, int], ...]
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2el: Distribution
    tokens_estimated: bool
    achieved_concurrency: float
    loop_lag_p99_s: float
    client_notes: tuple[str, ...]
    prompt_lengths: PromptTokens = PromptTokens(0, math.nan, math.nan, math.nan, math.nan)
    send_lateness_p99_s: float = math.nan
    """Trace or schedule replay: p99 of (send time − scheduled time)."""

    @property
    def client_limited(self) -> bool:
        return bool(self.client_notes)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.concurrency is not None:
            d["concurrency"] = self.concurrency
        if self.rate is not None:
            d["rate"] = self.rate
        d.update(
            duration_s=_json_num(self.duration_s),
            completed=self.completed,
            failed=self.failed,
            cancelled=self.cancelled,
            warmup_excluded=self.warmup_excluded,
            output_tokens=self.output_tokens,
            prompt_tokens=self.prompt_tokens,
            output_throughput_tok_s=_json_num(self.output_throughput_tok_s),
            total_throughput_tok_s=_json_num(self.total_throughput_tok_s),
            request_throughput_req_s=_json_num(self.request_throughput_req_s),
            goodput_req_s=_json_num(self.goodput_req_s),
            slo_attainment=_json_num(self.slo_attainment),
            error_rate=_json_num(self.error_rate),
            errors_by_kind=dict(self.errors_by_kind),
            ttft_ms=self.ttft.to_ms_dict(),
            tpot_ms=self.tpot.to_ms_dict(),
            itl_ms=self.itl.to_ms_dict(),
            e2el_ms=self.e2el.to_ms_dict(),
            tokens_estimated=self.tokens_estimated,
            achieved_concurrency=_json_num(self.achieved_concurrency),
            loop_lag_p99_ms=_json_num(self.loop_lag_p99_s * 1e3),
            client_limited=self.client_limited,
            client_notes=list(self.client_notes),
            prompt_lengths=self.prompt_lengths.to_dict(),
            send_lateness_p99_ms=_json_num(self.send_lateness_p99_s * 1e3),
        )
        return d


def _json_num(x: float) -> float | None:
    """JSON has no NaN: a missing value is ``null``."""
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def pooled_itl_s(records: Sequence[RequestRecord]) -> np.ndarray:
    """Every record's inter-token gaps in one array, as ``[g for r in records for g in r.itl_s]``
    but without a Python float per gap (a 1M-request report has ~30M of them): the chunk times
    side by side, differenced once, the gaps that span two records dropped."""
    lengths = np.fromiter(
        (len(r.chunk_times_s) for r in records), dtype=np.int64, count=len(records)
    )
    total = int(lengths.sum())
    if total < 2:
        return np.empty(0)
    flat = np.fromiter(
        itertools.chain.from_iterable(r.chunk_times_s for r in records), dtype=float, count=total
    )
    gaps = np.diff(flat)
    starts = np.cumsum(lengths)[:-1]  # where each next record's chunks begin
    keep = np.ones(gaps.size, dtype=bool)
    keep[starts[(starts > 0) & (starts < total)] - 1] = False
    return gaps[keep]


def meets_slo(rec: RequestRecord, slo: SLO) -> bool:
    """A good request (goodput): it succeeded and every set bound holds. A request with one
    output token has no TPOT and passes the TPOT bound (vLLM); a missing TTFT/E2EL fails."""
    tpot = rec.tpot_s
    return rec.ok and (
        (slo.ttft_s is None or rec.ttft_s <= slo.ttft_s)
        and (slo.tpot_s is None or math.isnan(tpot) or tpot <= slo.tpot_s)
        and (slo.e2el_s is None or rec.e2el_s <= slo.e2el_s)
    )


def summarize(
    records: Iterable[RequestRecord],
    duration_s: float | None = None,
    slo: SLO | None = None,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    achieved_concurrency: float | None = None,
    loop_lag_p99_s: float = math.nan,
    send_lateness_s: Sequence[float] = (),
) -> StepStats:
    """Summarize one step's records (warm-up ones are dropped here)."""
    all_recs = list(records)
    recs = [r for r in all_recs if not r.warmup]
    ok = [r for r in recs if r.ok]
    cancelled = sum(1 for r in recs if r.error_kind == ErrorKind.CANCELLED)
    failed_recs = [r for r in recs if not r.ok and r.error_kind != ErrorKind.CANCELLED]
    if duration_s is None:
        duration_s = (
            (max(r.end_s for r in recs) - min(r.sent_s for r in recs)) if recs else math.nan
        )
    dur = duration_s if duration_s and duration_s > 0 else math.nan
    out_tokens = sum(r.output_token_count for r in ok)
    prompt_known = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    prompt_tokens = sum(prompt_known) if ok and len(prompt_known) == len(ok) else None
    good = sum(1 for r in ok if meets_slo(r, slo)) if slo is not None and not slo.empty else None
    attempted = len(ok) + len(failed_recs)
    if achieved_concurrency is None:
        busy = sum(r.end_s - r.sent_s for r in recs if not math.isnan(r.end_s))
        achieved_concurrency = busy / dur if recs else math.nan
    lag = loop_lag_p99_s
    return StepStats(
        concurrency=concurrency,
        rate=rate,
        duration_s=duration_s,
        completed=len(ok),
        failed=len(failed_recs),
        cancelled=cancelled,
        warmup_excluded=len(all_recs) - len(recs),
        output_tokens=out_tokens,
        prompt_tokens=prompt_tokens,
        output_throughput_tok_s=out_tokens / dur,
        total_throughput_tok_s=(out_tokens + prompt_tokens) / dur
        if prompt_tokens is not None
        else math.nan,
        request_throughput_req_s=len(ok) / dur,
        goodput_req_s=good / dur if good is not None else math.nan,
        slo_attainment=good / attempted if good is not None and attempted else math.nan,
        error_rate=len(failed_recs) / attempted if attempted else math.nan,
        errors_by_kind=tuple(sorted(Counter(str(r.error_kind) for r in failed_recs).items())),
        ttft=Distribution.of([r.ttft_s for r in ok]),
        tpot=Distribution.of([r.tpot_s for r in ok if r.output_token_count > 1]),
        itl=Distribution.of(pooled_itl_s(ok)),
        e2el=Distribution.of([r.e2el_s for r in ok]),
        tokens_estimated=any(r.tokens_estimated for r in ok),
        achieved_concurrency=achieved_concurrency,
        loop_lag_p99_s=lag,
        client_notes=_client_notes(
            concurrency,
            rate,
            achieved_concurrency,
            len(ok) + len(failed_recs),
            dur,
            lag,
            float(np.percentile(send_lateness_s, 99)) if len(send_lateness_s) else math.nan,
        ),
        prompt_lengths=PromptTokens.of(ok),
        send_lateness_p99_s=float(np.percentile(send_lateness_s, 99))
        if len(send_lateness_s)
        else math.nan,
    )


def _client_notes(
    concurrency: int | None,
    rate: float | None,
    achieved: float,
    sent: int,
    dur: float,
    lag_s: float,
    late_s: float = math.nan,
) -> tuple[str, ...]:
    """When the client itself may be the bottleneck, say why (empty when all looks right)."""
    notes = []
    if concurrency and achieved < ACHIEVED_FRACTION * concurrency:
        notes.append(f"achieved concurrency {achieved:.1f} of target {concurrency}")
    if rate and sent / dur < ACHIEVED_FRACTION * rate:
        notes.append(f"achieved rate {sent / dur:.2f} of target {rate:g} req/s")
    if late_s > SEND_LATE_LIMIT_S:
        notes.append(f"sends p99 {late_s * 1e3:.1f} ms behind the trace/schedule")
    if lag_s > CLIENT_LAG_LIMIT_S:
        notes.append(f"event-loop lag p99 {lag_s * 1e3:.0f} ms: client timestamps are late")
    return tuple(notes)
