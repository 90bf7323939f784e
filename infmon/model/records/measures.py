"""What one request's latencies are summarised into, with ``vllm bench serve``'s definitions:
a latency's distribution (``numpy.percentile``, linear; ``nan`` when there is none), the prompt
lengths asked for and counted, the SLO a request meets, the pooled inter-token gaps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from infmon.model.records.request import RequestRecord


def number(x: object) -> float:
    """A number read from JSON as a float; anything else (None, a bool, a string) nan."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else math.nan


PERCENTILES = (50, 90, 95, 99)


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


class Latency(TypedDict, total=False):
    """One latency of a step in milliseconds (``Distribution.to_ms_dict``)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None


class PromptLengths(TypedDict, total=False):
    """Prompt tokens asked for against those the server counted (``PromptTokens.to_dict``)."""

    count: int
    requested_mean: float | None
    counted_mean: float | None
    counted_p50: float | None
    counted_p99: float | None
    mismatch: float | None


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

    def to_ms_dict(self) -> Latency:
        def ms(x: float) -> float | None:
            return _json_num(x * 1e3)

        return {
            "mean": ms(self.mean),
            "p50": ms(self.p50),
            "p90": ms(self.p90),
            "p95": ms(self.p95),
            "p99": ms(self.p99),
            "max": ms(self.max),
        }


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
        req = np.array([a for a, _ in pairs], dtype=float)
        got = np.array([b for _, b in pairs], dtype=float)
        return cls.of_arrays(req, got)

    @classmethod
    def of_arrays(cls, requested: np.ndarray, counted: np.ndarray) -> PromptTokens:
        """From the requested and counted lengths of the same requests."""
        if not len(counted):
            nan = math.nan
            return cls(0, nan, nan, nan, nan)
        p50, p99 = np.percentile(counted, (50, 99))
        return cls(
            len(counted), float(requested.mean()), float(counted.mean()), float(p50), float(p99)
        )

    @property
    def mismatch(self) -> float:
        """(counted − requested) / requested of the means; nan when unknown."""
        if not self.count or not self.requested_mean > 0:
            return math.nan
        return (self.counted_mean - self.requested_mean) / self.requested_mean

    def to_dict(self) -> PromptLengths:
        return {
            "count": self.count,
            "requested_mean": _json_num(self.requested_mean),
            "counted_mean": _json_num(self.counted_mean),
            "counted_p50": _json_num(self.counted_p50),
            "counted_p99": _json_num(self.counted_p99),
            "mismatch": _json_num(self.mismatch),
        }


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


def good_mask(slo: SLO, ttft_s: np.ndarray, tpot_s: np.ndarray, e2el_s: np.ndarray) -> np.ndarray:
    """``meets_slo`` of many successful requests at once (``tpot_s`` nan: one output token)."""
    good = np.ones(ttft_s.size, dtype=bool)
    if slo.ttft_s is not None:
        good &= ttft_s <= slo.ttft_s
    if slo.tpot_s is not None:
        good &= np.isnan(tpot_s) | (tpot_s <= slo.tpot_s)
    if slo.e2el_s is not None:
        good &= e2el_s <= slo.e2el_s
    return good


NO_PROMPT_LENGTHS = PromptTokens(0, math.nan, math.nan, math.nan, math.nan)
"""A step whose requests' prompt lengths are unknown."""
