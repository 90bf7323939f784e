"""Step statistics with exactly the definitions of ``vllm bench serve`` (DESIGN.md section 2).

TTFT, E2EL over successful requests; TPOT = (E2EL − TTFT) / (output_tokens − 1) over successful
requests with more than one output token; ITL pooled over every gap between content chunks;
throughputs over the step's measured duration; goodput = requests/s meeting every SLO bound
(a request with one output token has no TPOT and meets the TPOT bound, as in vLLM). Percentiles
are ``numpy.percentile`` (linear). Warm-up records are excluded. Missing values are ``nan``.

``summarize`` takes records, ``summarize_columns`` the same records as columns (reports over
millions of records); both reduce the same per-record values with the same code (``_reduce``),
and on records at the journal's precision they give identical figures (a hypothesis test).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from infmon.model.columns import RecordColumns
from infmon.model.records import ErrorKind, RequestRecord

PERCENTILES = (50, 90, 95, 99)
CLIENT_LAG_LIMIT_S = 0.05
"""Event-loop lag p99 above which the client's own timestamps are suspect."""
ACHIEVED_FRACTION = 0.9
"""Below this fraction of the target load, the client (not the server) may be the limit."""


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
        mean, top = float(a.mean()), float(a.max())
        p = np.percentile(a, PERCENTILES, overwrite_input=True)  # ``a`` is our copy (a mask)
        return cls(int(a.size), mean, float(p[0]), float(p[1]), float(p[2]), float(p[3]), top)

    def to_ms_dict(self) -> dict[str, float | None]:
        keys = ("mean", "p50", "p90", "p95", "p99", "max")
        return {k: _json_num(getattr(self, k) * 1e3) for k in keys}


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


@dataclass(frozen=True, slots=True)
class _StepValues:
    """What a step's statistics reduce, per record and in record order: the one meeting point of
    the record path (``summarize``) and the columnar path (``summarize_columns``)."""

    recorded: int
    """Every record of the step, warm-up included."""
    sent_s: np.ndarray
    end_s: np.ndarray
    """Of the measured (non-warm-up) records; ``nan`` where the end is unknown."""
    ok: np.ndarray
    cancelled: np.ndarray
    failed_kinds: list[str]
    """The error kind of each failed (not cancelled) measured record."""
    ttft_s: np.ndarray
    e2el_s: np.ndarray
    tpot_s: np.ndarray
    output_tokens: np.ndarray
    prompt_tokens: np.ndarray
    """Of the successful records; ``-1`` where the prompt length is unknown."""
    tokens_estimated: bool
    itl_s: np.ndarray


def _good(v: _StepValues, slo: SLO) -> int:
    """How many successful requests meet every bound (see ``meets_slo``), vectorised."""
    good = np.ones(v.ttft_s.size, dtype=bool)
    if slo.ttft_s is not None:
        good &= v.ttft_s <= slo.ttft_s
    if slo.tpot_s is not None:
        good &= np.isnan(v.tpot_s) | (v.tpot_s <= slo.tpot_s)
    if slo.e2el_s is not None:
        good &= v.e2el_s <= slo.e2el_s
    return int(good.sum())


def summarize(
    records: Iterable[RequestRecord],
    duration_s: float | None = None,
    slo: SLO | None = None,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    achieved_concurrency: float | None = None,
    loop_lag_p99_s: float = math.nan,
) -> StepStats:
    """Summarize one step's records (warm-up ones are dropped here)."""
    all_recs = list(records)
    recs = [r for r in all_recs if not r.warmup]
    ok = [r for r in recs if r.ok]
    values = _StepValues(
        recorded=len(all_recs),
        sent_s=np.array([r.sent_s for r in recs], dtype=float),
        end_s=np.array([r.end_s for r in recs], dtype=float),
        ok=np.array([r.ok for r in recs], dtype=bool),
        cancelled=np.array([r.error_kind == ErrorKind.CANCELLED for r in recs], dtype=bool),
        failed_kinds=[
            str(r.error_kind) for r in recs if not r.ok and r.error_kind != ErrorKind.CANCELLED
        ],
        ttft_s=np.array([r.ttft_s for r in ok], dtype=float),
        e2el_s=np.array([r.e2el_s for r in ok], dtype=float),
        tpot_s=np.array([r.tpot_s for r in ok], dtype=float),
        output_tokens=np.array([r.output_token_count for r in ok], dtype=np.int64),
        prompt_tokens=np.array(
            [-1 if r.prompt_tokens is None else r.prompt_tokens for r in ok], dtype=np.int64
        ),
        tokens_estimated=any(r.tokens_estimated for r in ok),
        itl_s=pooled_itl_s(ok),
    )
    return _reduce(values, duration_s, slo, concurrency, rate, achieved_concurrency, loop_lag_p99_s)


def summarize_columns(
    columns: RecordColumns,
    duration_s: float | None = None,
    slo: SLO | None = None,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    achieved_concurrency: float | None = None,
    loop_lag_p99_s: float = math.nan,
) -> StepStats:
    """``summarize`` over a step's records as columns (``infmon.model.columns``): the same
    figures as ``summarize`` of the decoded records, without a Python object per record."""
    recs = columns.take(~columns.warmup, chunks=False)
    ok = recs.take(recs.ok, chunks=False)
    failed = ~recs.ok & ~recs.cancelled
    values = _StepValues(
        recorded=len(columns),
        sent_s=recs.sent_s,
        end_s=recs.end_s,
        ok=recs.ok,
        cancelled=recs.cancelled,
        failed_kinds=[str(k) for k in recs.error_kind_at(recs.error_code[failed])],
        ttft_s=ok.ttft_s,
        e2el_s=ok.e2el_s,
        tpot_s=ok.tpot_s,
        output_tokens=ok.output_token_count,
        prompt_tokens=ok.prompt_tokens,
        tokens_estimated=bool(ok.tokens_estimated.any()),
        itl_s=columns.pooled_itl_s(columns.ok & ~columns.warmup),
    )
    return _reduce(values, duration_s, slo, concurrency, rate, achieved_concurrency, loop_lag_p99_s)


def _reduce(
    v: _StepValues,
    duration_s: float | None,
    slo: SLO | None,
    concurrency: int | None,
    rate: float | None,
    achieved_concurrency: float | None,
    lag: float,
) -> StepStats:
    measured = v.sent_s.size
    completed, failed = int(v.ok.sum()), len(v.failed_kinds)
    if duration_s is None:
        ends = v.end_s[~np.isnan(v.end_s)]
        duration_s = float(ends.max() - v.sent_s.min()) if ends.size else math.nan
    dur = duration_s if duration_s and duration_s > 0 else math.nan
    out_tokens = int(v.output_tokens.sum())
    prompt_known = v.prompt_tokens[v.prompt_tokens >= 0]
    prompt_tokens = (
        int(prompt_known.sum()) if completed and prompt_known.size == completed else None
    )
    good = _good(v, slo) if slo is not None and not slo.empty else None
    attempted = completed + failed
    if achieved_concurrency is None:
        known = ~np.isnan(v.end_s)
        busy = sum((v.end_s[known] - v.sent_s[known]).tolist())
        achieved_concurrency = busy / dur if measured else math.nan
    return StepStats(
        concurrency=concurrency,
        rate=rate,
        duration_s=duration_s,
        completed=completed,
        failed=failed,
        cancelled=int(v.cancelled.sum()),
        warmup_excluded=v.recorded - measured,
        output_tokens=out_tokens,
        prompt_tokens=prompt_tokens,
        output_throughput_tok_s=out_tokens / dur,
        total_throughput_tok_s=(out_tokens + prompt_tokens) / dur
        if prompt_tokens is not None
        else math.nan,
        request_throughput_req_s=completed / dur,
        goodput_req_s=good / dur if good is not None else math.nan,
        slo_attainment=good / attempted if good is not None and attempted else math.nan,
        error_rate=failed / attempted if attempted else math.nan,
        errors_by_kind=tuple(sorted(Counter(v.failed_kinds).items())),
        ttft=Distribution.of(v.ttft_s),
        tpot=Distribution.of(v.tpot_s[v.output_tokens > 1]),
        itl=Distribution.of(v.itl_s),
        e2el=Distribution.of(v.e2el_s),
        tokens_estimated=v.tokens_estimated,
        achieved_concurrency=achieved_concurrency,
        loop_lag_p99_s=lag,
        client_notes=_client_notes(concurrency, rate, achieved_concurrency, attempted, dur, lag),
    )


def _client_notes(
    concurrency: int | None,
    rate: float | None,
    achieved: float,
    sent: int,
    dur: float,
    lag_s: float,
) -> tuple[str, ...]:
    """When the client itself may be the bottleneck, say why (empty when all looks right)."""
    notes = []
    if concurrency and achieved < ACHIEVED_FRACTION * concurrency:
        notes.append(f"achieved concurrency {achieved:.1f} of target {concurrency}")
    if rate and sent / dur < ACHIEVED_FRACTION * rate:
        notes.append(f"achieved rate {sent / dur:.2f} of target {rate:g} req/s")
    if lag_s > CLIENT_LAG_LIMIT_S:
        notes.append(f"event-loop lag p99 {lag_s * 1e3:.0f} ms: client timestamps are late")
    return tuple(notes)
