"""The server's own account of one request: vLLM's per-request ``metrics`` object.

vLLM (≥ 0.32, ``--enable-per-request-metrics``) puts a ``metrics`` object in a stream's final
usage chunk (``choices: []``) or a whole response: ``queue_time_ms`` (queued → scheduled),
``time_to_first_token_ms`` (scheduled → first token, i.e. prefill), ``generation_time_ms``
(first → last token), ``mean_itl_ms`` (generation time over output tokens − 1) and
``tokens_per_second`` (output tokens over scheduled → last token), all from the engine core's
monotonic clock (``vllm/entrypoints/generate/base/serving.py::build_per_request_timing_metrics``).
With ``--per-request-spec-decode-metrics summary|detailed`` it adds ``speculative_decoding``
(n == 1 requests only): the request's own acceptance figures.

Everything here came from a server: ``parse_server_metrics`` believes a value only when it is
a finite number in a possible range, so a hostile or broken server cannot put a huge, negative
or non-numeric figure into a report. A missing figure is ``nan`` (never 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_MS = 1e9
"""A per-request time over ~11.6 days is impossible: dropped."""
MAX_RATE = 1e8
MAX_COUNT = 10_000_000
MAX_HISTOGRAM = 64
"""Acceptance histogram bins kept (``num_spec_tokens + 1``; real drafters draft < 64)."""


@dataclass(frozen=True, slots=True)
class SpecFigures:
    """One request's speculative decoding, as the server counted it (vLLM's definitions:
    rate = accepted drafts / drafted tokens; mean length = 1 + accepted / verify steps)."""

    num_spec_steps: int
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    num_spec_tokens: int = 0
    """Draft tokens proposed per step (k); 0 when not said."""
    mean_acceptance_length: float = math.nan
    draft_acceptance_rate: float = math.nan
    acceptance_histogram: tuple[int, ...] = ()
    """Index j: verify steps that accepted exactly j drafts."""

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens from the counts (the server's own figure's source)."""
        if self.num_draft_tokens <= 0:
            return math.nan
        return self.num_accepted_draft_tokens / self.num_draft_tokens


@dataclass(frozen=True, slots=True)
class ServerTiming:
    """The server's per-request times (ms, engine clock); ``nan`` where it gave none."""

    queue_ms: float = math.nan
    """Queued → first scheduled (waiting for capacity)."""
    prefill_ms: float = math.nan
    """Scheduled → first token (vLLM's ``time_to_first_token_ms``: prefill, no queue)."""
    decode_ms: float = math.nan
    """First → last token (vLLM's ``generation_time_ms``)."""
    mean_itl_ms: float = math.nan
    tokens_per_s: float = math.nan
    spec: SpecFigures | None = None

    @property
    def server_ms(self) -> float:
        """Queued → last token: the part of the request the engine saw."""
        return self.queue_ms + self.prefill_ms + self.decode_ms

    @property
    def server_ttft_ms(self) -> float:
        """Queued → first token."""
        return self.queue_ms + self.prefill_ms


def _ms(value: Any, upper: float = MAX_MS) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    v = float(value)
    return v if math.isfinite(v) and 0.0 <= v <= upper else math.nan


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_COUNT else None


def parse_spec(obj: Any) -> SpecFigures | None:
    """``metrics.speculative_decoding`` (untrusted): None unless its counts are possible."""
    if not isinstance(obj, dict):
        return None
    steps = _count(obj.get("num_spec_steps"))
    drafted = _count(obj.get("num_draft_tokens"))
    accepted = _count(obj.get("num_accepted_draft_tokens"))
    if steps is None or drafted is None or accepted is None or accepted > drafted:
        return None
    k = _count(obj.get("num_spec_tokens")) or 0
    hist_in = obj.get("acceptance_histogram")
    hist: tuple[int, ...] = ()
    if isinstance(hist_in, list) and len(hist_in) <= MAX_HISTOGRAM:
        counts = [_count(v) for v in hist_in]
        if all(c is not None for c in counts):
            hist = tuple(c for c in counts if c is not None)
    rate = _ms(obj.get("draft_acceptance_rate"), 1.0)
    length = _ms(obj.get("mean_acceptance_length"), float(MAX_HISTOGRAM + 1))
    return SpecFigures(steps, drafted, accepted, k, length, rate, hist)


def parse_server_metrics(obj: Any) -> ServerTiming | None:
    """vLLM's per-request ``metrics`` object (untrusted) → ``ServerTiming``; None when it holds
    no usable figure. Unknown keys (``per_step_*`` arrays of the detailed level) are ignored."""
    if not isinstance(obj, dict):
        return None
    timing = ServerTiming(
        _ms(obj.get("queue_time_ms")),
        _ms(obj.get("time_to_first_token_ms")),
        _ms(obj.get("generation_time_ms")),
        _ms(obj.get("mean_itl_ms")),
        _ms(obj.get("tokens_per_second"), MAX_RATE),
        parse_spec(obj.get("speculative_decoding")),
    )
    numbers = (timing.queue_ms, timing.prefill_ms, timing.decode_ms, timing.mean_itl_ms)
    if timing.spec is None and all(math.isnan(v) for v in (*numbers, timing.tokens_per_s)):
        return None
    return timing


# ---- the journal's compact encoding (a JSON list; nan as null) --------------------------------


def _num(v: float) -> float | None:
    """As sent (a float's JSON form reads back equal), ``nan`` as null."""
    return None if math.isnan(v) else v


def encode_timing(t: ServerTiming) -> list[Any]:
    """``[queue, prefill, decode, itl, tok/s]`` (+ ``[steps, drafted, accepted, k, length,
    rate, hist]`` with spec figures): short, and readable back by ``decode_timing``."""
    out: list[Any] = [_num(t.queue_ms), _num(t.prefill_ms), _num(t.decode_ms)]
    out += [_num(t.mean_itl_ms), _num(t.tokens_per_s)]
    s = t.spec
    if s is not None:
        out += [s.num_spec_steps, s.num_draft_tokens, s.num_accepted_draft_tokens]
        out += [s.num_spec_tokens, _num(s.mean_acceptance_length)]
        out += [_num(s.draft_acceptance_rate), list(s.acceptance_histogram)]
    return out


def decode_timing(value: Any) -> ServerTiming | None:
    """Inverse of ``encode_timing`` (a journal is read as untrusted too)."""
    if not isinstance(value, list) or len(value) < 5:
        return None
    spec = None
    if len(value) >= 12:
        keys = (
            "num_spec_steps",
            "num_draft_tokens",
            "num_accepted_draft_tokens",
            "num_spec_tokens",
            "mean_acceptance_length",
            "draft_acceptance_rate",
        )
        spec = parse_spec(
            {**dict(zip(keys, value[5:11], strict=True)), "acceptance_histogram": value[11]}
        )
    return ServerTiming(
        _ms(value[0]), _ms(value[1]), _ms(value[2]), _ms(value[3]), _ms(value[4], MAX_RATE), spec
    )


# ---- columns: the same figures for reports over many records -----------------------------------

_FIELDS = (
    "queue_ms",
    "prefill_ms",
    "decode_ms",
    "mean_itl_ms",
    "tokens_per_s",
    "spec_steps",
    "spec_drafted",
    "spec_accepted",
)


@dataclass(frozen=True, eq=False)
class ServerColumns:
    """Per-record arrays of the server's figures (``nan``: not sent) and each record's task
    kind (a code into ``tasks``; 0 is "unknown"), aligned with a ``RecordColumns``."""

    queue_ms: np.ndarray
    prefill_ms: np.ndarray
    decode_ms: np.ndarray
    mean_itl_ms: np.ndarray
    tokens_per_s: np.ndarray
    spec_steps: np.ndarray
    spec_drafted: np.ndarray
    spec_accepted: np.ndarray
    task_code: np.ndarray
    tasks: tuple[str | None, ...] = (None,)

    def __len__(self) -> int:
        return int(self.queue_ms.size)

    @classmethod
    def of(
        cls, timings: Sequence[ServerTiming | None], tasks: Sequence[str | None]
    ) -> ServerColumns:
        n = len(timings)
        vocab: dict[str | None, int] = {None: 0}
        codes = np.fromiter((vocab.setdefault(t, len(vocab)) for t in tasks), np.int64, n)
        rows = [_row(t) for t in timings]
        table = np.array(rows, dtype=float).reshape(n, len(_FIELDS))
        arrays = {name: table[:, i].copy() for i, name in enumerate(_FIELDS)}
        return cls(**arrays, task_code=codes, tasks=tuple(vocab))

    @classmethod
    def empty(cls, n: int) -> ServerColumns:
        return cls.of([None] * n, [None] * n)

    def take(self, idx: np.ndarray) -> ServerColumns:
        arrays = {name: getattr(self, name)[idx] for name in _FIELDS}
        return ServerColumns(**arrays, task_code=self.task_code[idx], tasks=self.tasks)

    @classmethod
    def concat(cls, parts: Sequence[ServerColumns]) -> ServerColumns:
        merged: dict[str | None, int] = {None: 0}
        for p in parts:
            for t in p.tasks:
                merged.setdefault(t, len(merged))
        codes = [
            np.array([merged[t] for t in p.tasks], np.int64)[p.task_code]
            if p.task_code.size
            else p.task_code
            for p in parts
        ]
        arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS}
        return cls(**arrays, task_code=np.concatenate(codes), tasks=tuple(merged))

    def task_of(self) -> list[str | None]:
        return [self.tasks[c] for c in self.task_code.tolist()]


def _row(t: ServerTiming | None) -> tuple[float, ...]:
    if t is None:
        return (math.nan,) * len(_FIELDS)
    s = t.spec
    spec = (
        (math.nan,) * 3
        if s is None
        else (
            float(s.num_spec_steps),
            float(s.num_draft_tokens),
            float(s.num_accepted_draft_tokens),
        )
    )
    return (t.queue_ms, t.prefill_ms, t.decode_ms, t.mean_itl_ms, t.tokens_per_s, *spec)
