"""A step's figures kept incrementally, in bounded memory, for the live view.

The live session cannot hold every record of a long step (a record's chunk times are ~4 KB), so
a tally keeps per request only what the statistics read: TTFT, TPOT and E2EL in growable numpy
arrays (24 bytes a request), the counts, and the inter-token gaps in a mergeable log-bucket
histogram. ``figures()`` gives the same ``StepFigures`` as ``infmon.model.stats.figures`` on the
same records, except the ITL distribution, which is read from the histogram (within 1 %);
reports, rebuilt from the journal, compute ITL exactly.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from infmon.model.loghist import LogHistogram
from infmon.model.records import ErrorKind, RequestRecord
from infmon.model.stats import SLO, Distribution, PromptTokens, StepFigures, meets_slo

_PS = (0.5, 0.9, 0.95, 0.99)


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


class StepTally:
    """The measured requests of one step, as figures (see the module docstring)."""

    def __init__(self, slo: SLO | None = None) -> None:
        self.slo = slo if slo is not None and not slo.empty else None
        self._ttft, self._tpot, self._e2el = _Column(), _Column(), _Column()
        self._asked, self._counted = _Column(), _Column()
        """Prompt lengths asked for and counted by the server, of requests that have both."""
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
            self._asked.append(rec.prompt_tokens_requested)
            self._counted.append(rec.prompt_tokens)
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
            ttft=Distribution.of(self._ttft.values()),
            tpot=Distribution.of(self._tpot.values()),
            itl=_from_histogram(self.itl),
            e2el=Distribution.of(self._e2el.values()),
            tokens_estimated=self.estimated,
            prompt_lengths=PromptTokens.of_arrays(self._asked.values(), self._counted.values()),
            last_sent_s=self.last_sent_s,
        )


def _from_histogram(h: LogHistogram) -> Distribution:
    if h.count == 0:
        return Distribution.of([])
    p50, p90, p95, p99 = h.quantiles(_PS)
    return Distribution(h.count, h.mean, p50, p90, p95, p99, h.maximum)
