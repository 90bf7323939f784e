"""A step's figures from its measured requests, with exactly the definitions of ``vllm bench
serve`` (DESIGN.md section 2; ``infmon.model.records.stats``), and its statistics from them.

``summarize`` takes records, ``summarize_columns`` the same records as columns (reports over
millions of records); both reduce the same per-record values with the same code
(``_figures``), and on records at the journal's precision they give identical figures (a
hypothesis test). A live step tally keeps the same ``StepFigures`` incrementally
(``infmon.model.steps.tally``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infmon.model.records.columns import RecordColumns
from infmon.model.records.measures import (
    SLO,
    Distribution,
    PromptTokens,
    good_mask,
    pooled_itl_s,
)
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.records.stats import StepStats, assemble


@dataclass(frozen=True, slots=True)
class StepFigures:
    """What a step's statistics are made of: counts and latency distributions of its measured
    requests. ``figures`` takes them from records, ``figures_of_columns`` from a journal's
    columns, a live step tally keeps them incrementally (``infmon.model.steps.tally``); ``assemble``
    turns any of them into the same ``StepStats``."""

    completed: int
    failed_kinds: tuple[tuple[str, int], ...]
    cancelled: int
    warmup_excluded: int
    output_tokens: int
    prompt_tokens: int | None
    """Sum over completed requests, when every one of them reported it."""
    good: int | None
    """Completed requests meeting every SLO bound (None without an SLO)."""
    busy_s: float
    """Sum of the measured requests' time in flight (achieved concurrency without a client check)."""
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2el: Distribution
    tokens_estimated: bool
    prompt_lengths: PromptTokens = field(default_factory=lambda: PromptTokens.of(()))
    """Prompt lengths asked for and as the server counted them (sized workloads)."""
    last_sent_s: float = math.nan
    """When the last measured request was sent (a rate step's sending ends there)."""

    @property
    def failed(self) -> int:
        return sum(n for _, n in self.failed_kinds)


@dataclass(frozen=True, slots=True)
class _StepValues:
    """What a step's figures reduce, per record and in record order: the one meeting point of
    the record path (``figures``) and the columnar path (``figures_of_columns``)."""

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
    prompt_requested: np.ndarray
    """Of the successful records; ``-1`` where no length was asked for."""
    tokens_estimated: bool
    itl_s: np.ndarray


def _good(v: _StepValues, slo: SLO) -> int:
    """How many successful requests meet every bound (``good_mask``)."""
    return int(good_mask(slo, v.ttft_s, v.tpot_s, v.e2el_s).sum())


def _values(records: Iterable[RequestRecord]) -> _StepValues:
    all_recs = list(records)
    recs = [r for r in all_recs if not r.warmup]
    ok = [r for r in recs if r.ok]

    def opt(values: Iterable[int | None]) -> np.ndarray:
        return np.array([-1 if x is None else x for x in values], dtype=np.int64)

    return _StepValues(
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
        prompt_tokens=opt(r.prompt_tokens for r in ok),
        prompt_requested=opt(r.prompt_tokens_requested for r in ok),
        tokens_estimated=any(r.tokens_estimated for r in ok),
        itl_s=pooled_itl_s(ok),
    )


def _columns_values(columns: RecordColumns) -> _StepValues:
    recs = columns.take(~columns.warmup, chunks=False)
    ok = recs.take(recs.ok, chunks=False)
    failed = ~recs.ok & ~recs.cancelled
    return _StepValues(
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
        prompt_requested=ok.prompt_tokens_requested,
        tokens_estimated=bool(ok.tokens_estimated.any()),
        itl_s=columns.pooled_itl_s(columns.ok & ~columns.warmup),
    )


def _figures(v: _StepValues, slo: SLO | None) -> StepFigures:
    completed = int(v.ok.sum())
    prompt_known = v.prompt_tokens[v.prompt_tokens >= 0]
    known_end = ~np.isnan(v.end_s)
    both = (v.prompt_requested >= 0) & (v.prompt_tokens >= 0)
    return StepFigures(
        completed=completed,
        failed_kinds=tuple(sorted(Counter(v.failed_kinds).items())),
        cancelled=int(v.cancelled.sum()),
        warmup_excluded=v.recorded - v.sent_s.size,
        output_tokens=int(v.output_tokens.sum()),
        prompt_tokens=int(prompt_known.sum())
        if completed and prompt_known.size == completed
        else None,
        good=_good(v, slo) if slo is not None and not slo.empty else None,
        busy_s=float(sum((v.end_s[known_end] - v.sent_s[known_end]).tolist())),
        ttft=Distribution.of(v.ttft_s),
        tpot=Distribution.of(v.tpot_s[v.output_tokens > 1]),
        itl=Distribution.of(v.itl_s),
        e2el=Distribution.of(v.e2el_s),
        tokens_estimated=v.tokens_estimated,
        prompt_lengths=PromptTokens.of_arrays(
            v.prompt_requested[both].astype(float), v.prompt_tokens[both].astype(float)
        ),
        last_sent_s=float(v.sent_s.max()) if v.sent_s.size else math.nan,
    )


def figures(records: Iterable[RequestRecord], slo: SLO | None = None) -> StepFigures:
    """The figures of a step's records (warm-up ones are counted and dropped)."""
    return _figures(_values(records), slo)


def figures_of_columns(columns: RecordColumns, slo: SLO | None = None) -> StepFigures:
    """``figures`` of a step's records as columns (``infmon.model.records.columns``): the same
    figures, without a Python object per record."""
    return _figures(_columns_values(columns), slo)


def _vllm_duration_s(v_sent: np.ndarray, v_end: np.ndarray) -> float:
    """From the first send to the last end of the measured records (vLLM's benchmark)."""
    ends = v_end[~np.isnan(v_end)]
    return float(ends.max() - v_sent.min()) if ends.size else math.nan


def summarize(
    records: Iterable[RequestRecord],
    duration_s: float | None = None,
    slo: SLO | None = None,
    **kw: Any,
) -> StepStats:
    """Summarize one step's records (warm-up ones are dropped here); ``kw`` as ``assemble``.

    Without ``duration_s`` the step lasts from its first send to its last end (vLLM's
    benchmark duration)."""
    v = _values(records)
    if duration_s is None:
        duration_s = _vllm_duration_s(v.sent_s, v.end_s)
    return assemble(_figures(v, slo), duration_s, **kw)


def summarize_columns(
    columns: RecordColumns,
    duration_s: float | None = None,
    slo: SLO | None = None,
    **kw: Any,
) -> StepStats:
    """``summarize`` over a step's records as columns: the same figures as ``summarize`` of
    the decoded records."""
    v = _columns_values(columns)
    if duration_s is None:
        duration_s = _vllm_duration_s(v.sent_s, v.end_s)
    return assemble(_figures(v, slo), duration_s, **kw)
