"""A step's figures kept incrementally, in bounded memory, for the live view.

The live session cannot hold every record of a long step (a record's chunk times are ~4 KB), so
a tally keeps per request only what the statistics read: TTFT, TPOT and E2EL in growable numpy
arrays (24 bytes a request), the counts, and the inter-token gaps in a mergeable log-bucket
histogram. ``figures()`` gives the same ``StepFigures`` as ``infmon.model.records.figures.figures``
on the same records, except the ITL distribution, which is read from the histogram (within 1 %);
reports, rebuilt from the journal, compute ITL exactly.

A live step can be held for a day. Given ``exact_limit`` (the monitor's: ``LIVE_EXACT_LIMIT``),
a tally past that many measured requests folds TTFT, TPOT and E2EL into log-bucket histograms
too (within 1 %, like ITL) and frees their arrays, and keeps the prompt lengths as exact counts
per length; its memory and the cost of ``figures()`` then stop growing. Bench steps keep every
value (no limit).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from infmon.model.base.loghist import LogHistogram
from infmon.model.records.figures import StepFigures
from infmon.model.records.measures import (
    NO_PROMPT_LENGTHS,
    SLO,
    Distribution,
    PromptTokens,
    meets_slo,
)
from infmon.model.records.request import ErrorKind, RequestRecord

_PS = (0.5, 0.9, 0.95, 0.99)
LIVE_EXACT_LIMIT = 200_000
"""Measured requests a live step keeps exact latencies for (~5 MB of arrays)."""


class _Column:
    """A growable float64 array (amortised doubling)."""

    __slots__ = ("data", "n")

    def __init__(self) -> None:
        self.data = np.empty(64)
        self.n = 0

    def append(self, x: float) -> None:
        if self.n == self.data.size:
            self.data = np.concatenate([self.data, np.empty(self.data.size)])
        self.data[self.n] = x
        self.n += 1

    def values(self) -> np.ndarray:
        return self.data[: self.n]


class _Latency:
    """One latency of every measured request: exact values, or (folded) a histogram."""

    __slots__ = ("exact", "hist")

    def __init__(self) -> None:
        self.exact: _Column | None = _Column()
        self.hist: LogHistogram | None = None

    def append(self, x: float) -> None:
        if self.exact is not None:
            self.exact.append(x)
        else:
            assert self.hist is not None
            self.hist.add_one(x)  # a histogram skips nan (a missing value), as percentiles do

    def fold(self) -> None:
        if self.exact is not None:
            self.hist = LogHistogram()
            self.hist.add(self.exact.values())
            self.exact = None

    def distribution(self) -> Distribution:
        if self.exact is not None:
            return Distribution.of(self.exact.values())
        assert self.hist is not None
        return _from_histogram(self.hist)


class _PromptLengths:
    """Prompt lengths asked for and counted by the server, of requests that have both: exact
    columns, or (folded) the sum asked for and a count per counted length (still exact)."""

    def __init__(self) -> None:
        self.asked: _Column | None = _Column()
        self.counted: _Column | None = _Column()
        self.asked_sum = 0.0
        self.per_length: Counter[int] = Counter()

    def append(self, asked: int, counted: int) -> None:
        if self.asked is not None and self.counted is not None:
            self.asked.append(asked)
            self.counted.append(counted)
        else:
            self.asked_sum += asked
            self.per_length[counted] += 1

    def fold(self) -> None:
        if self.asked is not None and self.counted is not None:
            self.asked_sum = float(self.asked.values().sum())
            self.per_length.update(int(x) for x in self.counted.values())
            self.asked = self.counted = None

    def summary(self) -> PromptTokens:
        if self.asked is not None and self.counted is not None:
            return PromptTokens.of_arrays(self.asked.values(), self.counted.values())
        n = sum(self.per_length.values())
        if not n:
            return NO_PROMPT_LENGTHS
        lengths = np.array(sorted(self.per_length), dtype=float)
        counts = np.array([self.per_length[int(x)] for x in lengths])
        p50, p99 = (_rank_value(lengths, np.cumsum(counts), q * (n - 1)) for q in (0.5, 0.99))
        mean = float((lengths * counts).sum() / n)
        return PromptTokens(n, self.asked_sum / n, mean, p50, p99)


def _rank_value(values: np.ndarray, cumulative: np.ndarray, rank: float) -> float:
    """numpy's linear percentile at ``rank`` (0-based) of sorted ``values`` with counts."""
    lo, hi = math.floor(rank), math.ceil(rank)
    a = float(values[np.searchsorted(cumulative, lo, side="right")])
    b = float(values[np.searchsorted(cumulative, hi, side="right")])
    return a + (b - a) * (rank - lo)


class StepTally:
    """The measured requests of one step, as figures (see the module docstring)."""

    def __init__(self, slo: SLO | None = None, exact_limit: int | None = None) -> None:
        self.slo = slo if slo is not None and not slo.empty else None
        self.exact_limit = exact_limit
        self._ttft, self._tpot, self._e2el = _Latency(), _Latency(), _Latency()
        self._prompts = _PromptLengths()
        self.itl = LogHistogram()
        self.completed = self.cancelled = self.warmup_excluded = self.output_tokens = 0
        self.good = 0
        self.prompt_sum = 0
        self.prompt_known = True
        self.estimated = False
        self.busy_s = 0.0
        self.last_end_s = -math.inf
        """When the last measured request ended (a step measured by request count ends there)."""
        self.last_sent_s = math.nan
        self.failed: Counter[str] = Counter()
        self._figures: StepFigures | None = None
        """The last ``figures()``, until the next record (a snapshot asks several times)."""

    def add(self, rec: RequestRecord) -> None:
        """A request of this step (warm-up ones are counted and left out)."""
        self._figures = None
        if rec.warmup:
            self.warmup_excluded += 1
            return
        if not rec.sent_s <= self.last_sent_s:  # nan at first
            self.last_sent_s = rec.sent_s
        if not math.isnan(rec.end_s):
            self.busy_s += rec.end_s - rec.sent_s
            self.last_end_s = max(self.last_end_s, rec.end_s)
        if not rec.ok:
            if rec.error_kind == ErrorKind.CANCELLED:
                self.cancelled += 1
            else:
                self.failed[str(rec.error_kind)] += 1
            return
        self.completed += 1
        n = rec.output_token_count
        self.output_tokens += n
        if rec.prompt_tokens is None:
            self.prompt_known = False
        else:
            self.prompt_sum += rec.prompt_tokens
        self.estimated = self.estimated or rec.tokens_estimated
        if self.slo is not None and meets_slo(rec, self.slo):
            self.good += 1
        if rec.prompt_tokens_requested is not None and rec.prompt_tokens is not None:
            self._prompts.append(rec.prompt_tokens_requested, rec.prompt_tokens)
        if self.completed == self.exact_limit:
            for part in (self._ttft, self._tpot, self._e2el, self._prompts):
                part.fold()
        self._ttft.append(rec.ttft_s)
        self._e2el.append(rec.e2el_s)
        if n > 1:
            self._tpot.append(rec.tpot_s)
        if len(rec.chunk_times_s) > 1:
            self.itl.add(np.diff(np.asarray(rec.chunk_times_s)))

    def exclude(self) -> None:
        """A request of this step sent outside its measured time (counted, left out)."""
        self._figures = None
        self.warmup_excluded += 1

    def figures(self) -> StepFigures:
        """The step's figures (percentiles over every measured request: computed once per
        change, since their cost grows with the step)."""
        if self._figures is None:
            self._figures = self._compute()
        return self._figures

    def _compute(self) -> StepFigures:
        return StepFigures(
            completed=self.completed,
            failed_kinds=tuple(sorted(self.failed.items())),
            cancelled=self.cancelled,
            warmup_excluded=self.warmup_excluded,
            output_tokens=self.output_tokens,
            prompt_tokens=self.prompt_sum if self.completed and self.prompt_known else None,
            good=self.good if self.slo is not None else None,
            busy_s=self.busy_s,
            ttft=self._ttft.distribution(),
            tpot=self._tpot.distribution(),
            itl=_from_histogram(self.itl),
            e2el=self._e2el.distribution(),
            tokens_estimated=self.estimated,
            prompt_lengths=self._prompts.summary(),
            last_sent_s=self.last_sent_s,
        )


def _from_histogram(h: LogHistogram) -> Distribution:
    if h.count == 0:
        return Distribution.of([])
    p50, p90, p95, p99 = h.quantiles(_PS)
    return Distribution(h.count, h.mean, p50, p90, p95, p99, h.maximum)
