"""Step statistics with exactly the definitions of ``vllm bench serve`` (DESIGN.md section 2).

TTFT, E2EL over successful requests; TPOT = (E2EL − TTFT) / (output_tokens − 1) over successful
requests with more than one output token; ITL pooled over every gap between content chunks;
throughputs over the step's measured duration; goodput = requests/s meeting every SLO bound
(a request with one output token has no TPOT and meets the TPOT bound, as in vLLM). Percentiles
are ``numpy.percentile`` (linear). Warm-up records are excluded. Missing values are ``nan``.

A step's figures (counts and latency distributions: ``infmon.model.records.figures``) become its
``StepStats`` here (``assemble``), with its throughputs and the client's self-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from infmon.model.records.client_late import NO_CAUSE, LateCause
from infmon.model.records.measures import (
    NO_PROMPT_LENGTHS,
    Distribution,
    Latency,
    PromptLengths,
    PromptTokens,
    _json_num,
)

if TYPE_CHECKING:
    from infmon.model.records.figures import StepFigures

CLIENT_LAG_LIMIT_S = 0.05
"""Event-loop lag p99 above which the client's own timestamps are suspect."""
ACHIEVED_FRACTION = 0.9
"""Below this fraction of the target load, the client (not the server) may be the limit."""
SEND_LATE_LIMIT_S = 0.005
"""Trace/schedule sends later than this at p99: the replay's timing is off."""
PROMPT_MISMATCH_FRACTION = 0.02
"""Server-counted prompt tokens off the requested ones by more than this: a diagnosis line."""


class StepStatsEntry(TypedDict, total=False):
    """``StepStats.to_dict()``: a ``steps[]`` entry's figures (``infmon bench --json``, the
    report), numbers null when missing; ``concurrency`` or ``rate`` names the level (a vLLM
    bench result without ``max_concurrency`` has a null ``concurrency``)."""

    concurrency: int | None
    rate: float
    duration_s: float | None
    completed: int
    failed: int
    cancelled: int
    warmup_excluded: int
    output_tokens: int
    prompt_tokens: int | None
    output_throughput_tok_s: float | None
    total_throughput_tok_s: float | None
    request_throughput_req_s: float | None
    goodput_req_s: float | None
    slo_attainment: float | None
    error_rate: float | None
    errors_by_kind: dict[str, int]
    ttft_ms: Latency
    tpot_ms: Latency
    itl_ms: Latency
    e2el_ms: Latency
    tokens_estimated: bool
    achieved_concurrency: float | None
    loop_lag_p99_ms: float | None
    client_limited: bool
    client_notes: list[str]
    client_late: bool
    prompt_lengths: PromptLengths
    send_lateness_p99_ms: float | None


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
    prompt_lengths: PromptTokens = NO_PROMPT_LENGTHS
    send_lateness_p99_s: float = math.nan
    """Trace or schedule replay: p99 of (send time − scheduled time)."""
    late_cause: LateCause = NO_CAUSE
    """Why the client's timestamps were late (``infmon.model.records.client_late``)."""

    @property
    def client_limited(self) -> bool:
        return bool(self.client_notes)

    @property
    def client_late(self) -> bool:
        """The client's own timestamps were late (its loop lagged, or its load thread starved
        for a CPU, or the workers left after a worker loss were saturated): the step's latencies
        carry the client's delay, its deltas are not tested."""
        cause = self.late_cause
        return self.loop_lag_p99_s > CLIENT_LAG_LIMIT_S or cause.starved or bool(cause.bound)

    def to_dict(self) -> StepStatsEntry:
        d: StepStatsEntry = {}
        if self.concurrency is not None:
            d["concurrency"] = self.concurrency
        if self.rate is not None:
            d["rate"] = self.rate
        return {
            **d,
            "duration_s": _json_num(self.duration_s),
            "completed": self.completed,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "warmup_excluded": self.warmup_excluded,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "output_throughput_tok_s": _json_num(self.output_throughput_tok_s),
            "total_throughput_tok_s": _json_num(self.total_throughput_tok_s),
            "request_throughput_req_s": _json_num(self.request_throughput_req_s),
            "goodput_req_s": _json_num(self.goodput_req_s),
            "slo_attainment": _json_num(self.slo_attainment),
            "error_rate": _json_num(self.error_rate),
            "errors_by_kind": dict(self.errors_by_kind),
            "ttft_ms": self.ttft.to_ms_dict(),
            "tpot_ms": self.tpot.to_ms_dict(),
            "itl_ms": self.itl.to_ms_dict(),
            "e2el_ms": self.e2el.to_ms_dict(),
            "tokens_estimated": self.tokens_estimated,
            "achieved_concurrency": _json_num(self.achieved_concurrency),
            "loop_lag_p99_ms": _json_num(self.loop_lag_p99_s * 1e3),
            "client_limited": self.client_limited,
            "client_notes": list(self.client_notes),
            "client_late": self.client_late,
            "prompt_lengths": self.prompt_lengths.to_dict(),
            "send_lateness_p99_ms": _json_num(self.send_lateness_p99_s * 1e3),
        }


def assemble(
    fig: StepFigures,
    duration_s: float,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    achieved_concurrency: float | None = None,
    loop_lag_p99_s: float = math.nan,
    window_output_tokens: float | None = None,
    window_prompt_tokens: float | None = None,
    send_lateness_p99_s: float = math.nan,
    sending_s: float | None = None,
    late_cause: LateCause = NO_CAUSE,
) -> StepStats:
    """A step's ``StepStats`` from its figures and measured duration.

    ``sending_s``: how long the step sent for (a rate step measured to its last request's end
    stopped sending before its drain); the achieved rate is judged over it (default: the
    measured duration).

    ``window_output_tokens``: the output tokens whose chunks arrived inside the measured
    window (every request's, warm-up and earlier steps' included): the step's throughput is
    then the rate the server generated at while the level was held, as its own counter sees
    it, instead of the tokens of the measured requests (which misses the tokens of requests
    that began in the warm-up and counts tokens generated after the window).
    """
    dur = duration_s if duration_s and duration_s > 0 else math.nan
    out = fig.output_tokens if window_output_tokens is None else window_output_tokens
    prompt: float | None = fig.prompt_tokens
    if window_prompt_tokens is not None and fig.prompt_tokens is not None:
        prompt = window_prompt_tokens
    attempted = fig.completed + fig.failed
    if achieved_concurrency is None or math.isnan(achieved_concurrency):
        achieved_concurrency = fig.busy_s / dur if attempted or fig.cancelled else math.nan
    lag = loop_lag_p99_s
    good = fig.good
    return StepStats(
        concurrency=concurrency,
        rate=rate,
        duration_s=duration_s,
        completed=fig.completed,
        failed=fig.failed,
        cancelled=fig.cancelled,
        warmup_excluded=fig.warmup_excluded,
        output_tokens=fig.output_tokens,
        prompt_tokens=fig.prompt_tokens,
        output_throughput_tok_s=out / dur,
        total_throughput_tok_s=(out + prompt) / dur if prompt is not None else math.nan,
        request_throughput_req_s=fig.completed / dur,
        goodput_req_s=good / dur if good is not None else math.nan,
        slo_attainment=good / attempted if good is not None and attempted else math.nan,
        error_rate=fig.failed / attempted if attempted else math.nan,
        errors_by_kind=fig.failed_kinds,
        ttft=fig.ttft,
        tpot=fig.tpot,
        itl=fig.itl,
        e2el=fig.e2el,
        tokens_estimated=fig.tokens_estimated,
        achieved_concurrency=achieved_concurrency,
        loop_lag_p99_s=lag,
        client_notes=_client_notes(
            concurrency,
            rate,
            achieved_concurrency,
            attempted + fig.cancelled,
            sending_s if sending_s and sending_s > 0 else dur,
            lag,
            send_lateness_p99_s,
            late_cause,
        ),
        prompt_lengths=fig.prompt_lengths,
        send_lateness_p99_s=send_lateness_p99_s,
        late_cause=late_cause,
    )


def _client_notes(
    concurrency: int | None,
    rate: float | None,
    achieved: float,
    sent: int,
    dur: float,
    lag_s: float,
    late_s: float = math.nan,
    cause: LateCause = NO_CAUSE,
) -> tuple[str, ...]:
    """When the client itself may be the bottleneck, say why (empty when all looks right).

    A rate step's sends are random (Poisson): it is short of its target only when it sent
    fewer than ``ACHIEVED_FRACTION`` of the expected arrivals *and* more than three standard
    deviations fewer (40 expected: fewer than 21, not 36), over the time it was sending."""
    notes = []
    if concurrency and achieved < ACHIEVED_FRACTION * concurrency:
        notes.append(f"achieved concurrency {achieved:.1f} of target {concurrency}")
    expected = rate * dur if rate else math.nan
    if rate and sent < ACHIEVED_FRACTION * expected and sent < expected - 3 * math.sqrt(expected):
        notes.append(f"achieved rate {sent / dur:.2f} of target {rate:g} req/s")
    if late_s > SEND_LATE_LIMIT_S:
        notes.append(f"sends p99 {late_s * 1e3:.1f} ms behind the trace/schedule")
    if lag_s > CLIENT_LAG_LIMIT_S:
        why = f" ({cause.text})" if cause.text else ""
        notes.append(f"event-loop lag p99 {lag_s * 1e3:.0f} ms: client timestamps are late{why}")
    elif cause.starved:
        notes.append(f"client timestamps are late ({cause.text})")
    if cause.bound:
        notes.append(f"client-bound: {cause.bound}")
    return tuple(notes)
