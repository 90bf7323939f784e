"""A step's figures as the comparison of runs reads them: per step, the measured requests'
latencies, the tokens per second of measured time in bins, the good requests by bin, and what
the server's spec counters said (``LevelSample``, what the noise and bootstrap tests resample).

``StepLevels`` keeps them per step for the ``StepLedger``, which routes every record, load
window, chunk and scrape to its step once, for its own figures and for these alike, so a
level's figures are computed the same way on every side: the live monitor and bench's
``--baseline`` (records, the load's windows, snapshots: ``metered``) and a recorded session
(``infmon.report.runs``: the journal's columns, its scrapes). The selection is the step
model's: requests sent inside the step's measured time (warm-up excluded), tokens whose chunks
arrived inside it (every request's), scrapes taken inside it. ``StepLevel`` alone also builds a
level from per-request figures (a report's CSV, a vLLM bench file).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from infmon.model.records.measures import SLO, good_mask, meets_slo
from infmon.model.records.request import RequestRecord
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.book import StepBook
from infmon.model.steps.evidence import ServerEvidence
from infmon.model.steps.span import CLOSED, RATE, Level, StepSpan

NAN = math.nan
BIN_S = 1.0
"""Throughput's noise test resamples bins of this much measured time."""
MAX_GAP_REQUESTS = 20_000
"""A level keeps the inter-token gaps of at most this many requests (ITL, sampled beyond)."""
MAX_LIVE_REQUESTS = 50_000
"""The live monitor keeps at most this many requests' latencies per level."""
SpecCounters = Mapping[str, object]
"""One scrape's ``spec_decode`` (``SpecDecode.to_dict()``, or the journal's copy of it)."""


def spec_counters(snap: ServerSnapshot) -> SpecCounters | None:
    """A good snapshot's spec counters (None: a failed scrape, or no speculative decoding)."""
    spec = snap.spec_decode
    return spec.to_dict() if snap.ok and spec is not None else None


@dataclass(frozen=True, slots=True)
class SpecWindow:
    """Speculative decoding over a level's measured time (vLLM's derived figures)."""

    k: int
    """Draft tokens per draft (0: unknown)."""
    acceptance_rate: float
    """Accepted / draft tokens."""
    mean_length: float
    """1 + accepted / drafts: tokens per engine step."""
    per_position: tuple[float, ...] = ()
    """Accepted at draft position i / drafts (vLLM's per-position acceptance rate)."""


class SpecMeter:
    """Spec-decoding counters summed over a level's scrapes (a counter that goes back is a
    restart: it counts from zero again), or the server's own rates when it publishes no
    totals."""

    TOTALS = ("drafts_total", "draft_tokens_total", "accepted_tokens_total")

    def __init__(self) -> None:
        self.last: tuple[float, ...] | None = None
        self.sums = [0.0, 0.0, 0.0]
        self.k = 0
        self.rates: list[tuple[float, float]] = []
        self.last_pos: tuple[float, ...] | None = None
        self.pos_sums: list[float] = []

    def observe(self, spec: SpecCounters | None) -> None:
        """One scrape's ``spec_decode``."""
        if not spec:
            return
        per_position = spec.get("acceptance_per_position")
        self.k = (len(per_position) if isinstance(per_position, (list, tuple)) else 0) or self.k
        self._observe_positions(spec.get("accepted_per_position_total"))
        totals = [spec.get(n) for n in self.TOTALS]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in totals):
            now = tuple(float(x) for x in totals if isinstance(x, (int, float)))
            if self.last is not None:
                back = any(b < a for a, b in zip(self.last, now, strict=True))
                for i, (a, b) in enumerate(zip(self.last, now, strict=True)):
                    self.sums[i] += b if back else b - a
            self.last = now
            return
        rate, length = spec.get("acceptance_rate"), spec.get("mean_acceptance_length")
        if isinstance(rate, (int, float)) and isinstance(length, (int, float)):
            self.rates.append((float(rate), float(length)))

    def _observe_positions(self, totals: object) -> None:
        """Accepted tokens per draft position, summed like the totals (a restart counts anew)."""
        if not isinstance(totals, (list, tuple)) or not totals:
            return
        now = tuple(float(x) if isinstance(x, (int, float)) else math.nan for x in totals)
        last = self.last_pos
        if last is not None and len(last) == len(now):
            back = any(b < a for a, b in zip(last, now, strict=True))
            if len(self.pos_sums) != len(now):
                self.pos_sums = [0.0] * len(now)
            for i, (a, b) in enumerate(zip(last, now, strict=True)):
                self.pos_sums[i] += b if back else b - a
        self.last_pos = now

    def window(self) -> SpecWindow | None:
        drafts, draft_tokens, accepted = self.sums
        if drafts > 0 and draft_tokens > 0:
            k = self.k or round(draft_tokens / drafts)
            per_pos = tuple(a / drafts for a in self.pos_sums)
            return SpecWindow(k, accepted / draft_tokens, 1.0 + accepted / drafts, per_pos)
        if self.rates:
            rates = np.asarray(self.rates)
            return SpecWindow(self.k, float(np.median(rates[:, 0])), float(np.median(rates[:, 1])))
        return None


@dataclass(frozen=True, eq=False)
class LevelSample:
    """One step of a run at one load level, as the comparison reads it."""

    level: Level
    step: int
    duration_s: float
    """Measured seconds (warm-ups and pauses excluded)."""
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    """Of the successful requests with more than one output token."""
    e2el_s: np.ndarray
    good_bins: np.ndarray | None
    """Successful requests meeting every SLO bound, by the bin they were sent in (None: no
    SLO); over ``bin_s`` they are the goodput."""
    gaps_s: np.ndarray
    gaps_per_request: np.ndarray
    token_bins: np.ndarray
    """Output tokens whose chunks arrived in each bin of measured time."""
    bin_s: np.ndarray
    """Each bin's measured seconds."""
    output_tokens: int
    chunks: int
    spec: SpecWindow | None = None
    server: ServerEvidence | None = None
    gaps_sampled: bool = False
    """ITL from the first ``MAX_GAP_REQUESTS`` requests only (a very long step)."""
    client_late: bool = False
    """The client's timestamps were late in this step (``StepStats.client_late``)."""

    @property
    def label(self) -> str:
        return self.level.label

    @property
    def requests(self) -> int:
        return int(self.e2el_s.size)

    @property
    def tokens_per_chunk(self) -> float:
        """Output tokens per content chunk, from the stream (≈ the acceptance length)."""
        return self.output_tokens / self.chunks if self.chunks else NAN


@dataclass(slots=True)
class StepLevel:
    """One step's measurements (see the module docstring)."""

    span: StepSpan
    slo: SLO | None = None
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    e2el: list[float] = field(default_factory=list)
    good: dict[tuple[int, int], float] = field(default_factory=dict)
    """(segment, bin) of the send → good requests sent in it."""
    gaps: list[np.ndarray] = field(default_factory=list)
    gap_counts: list[int] = field(default_factory=list)
    bins: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    """(segment, bin) → [tokens, seconds]."""
    output_tokens: int = 0
    chunks: int = 0
    spec: SpecMeter = field(default_factory=SpecMeter)
    capped: bool = False

    # ---- requests -----------------------------------------------------------------------------
    def add_request(self, rec: RequestRecord) -> None:
        """One successful measured request (its chunk times for ITL)."""
        if len(self.e2el) >= MAX_LIVE_REQUESTS:
            self.capped = True
            return
        tokens, times = rec.output_token_count, np.asarray(rec.chunk_times_s, dtype=float)
        self.ttft.append(rec.ttft_s)
        self.e2el.append(rec.e2el_s)
        if tokens > 1:
            self.tpot.append(rec.tpot_s)
        slo = self.slo
        if slo is not None and not slo.empty and meets_slo(rec, slo):
            self._count_good(np.array([rec.sent_s]))
        self.output_tokens += tokens
        self.chunks += int(times.size)
        if len(self.gap_counts) < MAX_GAP_REQUESTS:
            g = np.diff(times) if times.size > 1 else np.empty(0)
            self.gaps.append(g)
            self.gap_counts.append(int(g.size))

    def add_columns(
        self,
        sent: np.ndarray,
        ttft: np.ndarray,
        tpot: np.ndarray,
        e2el: np.ndarray,
        tokens: np.ndarray,
        gaps: np.ndarray,
        chunks: np.ndarray,
    ) -> None:
        """Many successful measured requests at once (a journal's columns)."""
        self.ttft.extend(ttft.tolist())
        self.e2el.extend(e2el.tolist())
        self.tpot.extend(tpot[tokens > 1].tolist())
        if self.slo is not None and not self.slo.empty:
            t = np.where(tokens > 1, tpot, np.nan)
            self._count_good(sent[good_mask(self.slo, ttft, t, e2el)])
        self.output_tokens += int(tokens.sum())
        self.chunks += int(chunks.sum())
        per = np.maximum(chunks - 1, 0)
        room = MAX_GAP_REQUESTS - len(self.gap_counts)
        if room > 0:
            take = per[:room]
            self.gaps.append(gaps[: int(take.sum())])
            self.gap_counts.extend(take.tolist())

    # ---- tokens -------------------------------------------------------------------------------
    def add_chunk_tokens(self, seg: int, lo: float, times: np.ndarray, weights: np.ndarray) -> None:
        """Chunks inside segment ``seg`` (measured from ``lo``; absolute times, tokens each),
        to its bins."""
        idx = ((times - lo) // BIN_S).astype(np.int64)
        sums = np.bincount(idx, weights=weights)
        for b in np.flatnonzero(sums):
            self._bin(seg, int(b))[0] += float(sums[b])

    def add_window_parts(
        self, parts: Iterable[tuple[int, float, float, float]], tokens: float, width_s: float
    ) -> None:
        """A load window's tokens (``width_s`` long), by the parts of it inside the measured
        time (``StepSpan.overlaps``), each part to the bin at its middle."""
        for seg, lo, start, end in parts:
            overlap = end - start
            cell = self._bin(seg, int(((start + end) / 2 - lo) // BIN_S))
            cell[0] += tokens * overlap / width_s
            cell[1] += overlap

    def _count_good(self, sent: np.ndarray) -> None:
        for seg, (lo, hi) in enumerate(self.span.windows()):
            inside = sent[(sent >= lo) & (sent < hi)]
            for b in ((inside - lo) // BIN_S).astype(np.int64).tolist():
                self.good[(seg, b)] = self.good.get((seg, b), 0.0) + 1.0
        if not self.span.segments:  # a recorded run without its step's times: one bin
            self.good[(0, 0)] = self.good.get((0, 0), 0.0) + float(sent.size)

    def _bin(self, seg: int, b: int) -> list[float]:
        cell = self.bins.get((seg, b))
        if cell is None:
            cell = self.bins[(seg, b)] = [0.0, 0.0]
        return cell

    def _bins(self, now: float, metered: bool) -> list[tuple[tuple[int, int], float, float]]:
        """Every bin of the measured time: (key, tokens, seconds). Chunk-credited bins cover
        the whole measured time (empty seconds included); metered ones what the windows
        covered."""
        if metered:
            return [(k, c[0], c[1]) for k, c in sorted(self.bins.items())]
        out = []
        for seg, s in enumerate(self.span.segments):
            length = s.measured_s(now)
            for b in range(math.ceil(length / BIN_S)):
                cell = self.bins.get((seg, b))
                out.append(((seg, b), cell[0] if cell else 0.0, min(BIN_S, length - b * BIN_S)))
        return out

    # ---- the sample ---------------------------------------------------------------------------
    def sample(
        self, span: StepSpan, now: float, evidence: ServerEvidence | None, metered: bool = False
    ) -> LevelSample:
        """The step's sample: ``metered`` when its tokens came from the load's windows."""
        self.span = span
        bins = self._bins(now, metered)
        tokens = np.array([t for _, t, _ in bins])
        secs = np.array([x for _, _, x in bins])
        good = np.array([self.good.get(k, 0.0) for k, _, _ in bins])
        gaps = np.concatenate(self.gaps) if self.gaps else np.empty(0)
        return LevelSample(
            level=span.level,
            step=span.index,
            duration_s=span.measured_s(now),
            ttft_s=np.asarray(self.ttft, dtype=float),
            tpot_s=np.asarray(self.tpot, dtype=float),
            e2el_s=np.asarray(self.e2el, dtype=float),
            good_bins=good if self.slo is not None and not self.slo.empty else None,
            gaps_s=gaps.astype(float),
            gaps_per_request=np.asarray(self.gap_counts, dtype=np.int64),
            token_bins=tokens,
            bin_s=secs,
            output_tokens=self.output_tokens,
            chunks=self.chunks,
            spec=self.spec.window(),
            server=evidence,
            gaps_sampled=len(self.gap_counts) < len(self.e2el),
        )


def by_level(samples: Sequence[LevelSample]) -> dict[Level, LevelSample]:
    """One sample per level: the step with the most measured requests (closed and rate)."""
    out: dict[Level, LevelSample] = {}
    for s in samples:
        if s.level.mode not in (CLOSED, RATE):
            continue
        cur = out.get(s.level)
        if cur is None or s.requests > cur.requests:
            out[s.level] = s
    return out


class StepLevels:
    """Each step's ``StepLevel``, as the ``StepLedger`` feeds them (see the module docstring):
    ``keep`` steps at most (the oldest let go; None: all)."""

    def __init__(
        self, book: StepBook, slo: SLO | None, keep: int | None, keep_requests: bool = True
    ) -> None:
        self.book, self.slo, self.keep = book, slo, keep
        self.keep_requests = keep_requests
        """False: count tokens and chunks only (the per-level spec figures need no more)."""
        self.builders: dict[int, StepLevel] = {}

    def of(self, span: StepSpan) -> StepLevel:
        """The step's measurements (begun now if new), as of its latest ``span``."""
        b = self.builders.get(span.index)
        if b is None:
            b = self.builders[span.index] = StepLevel(span, self.slo)
            while self.keep is not None and len(self.builders) > self.keep:
                del self.builders[min(self.builders)]
        b.span = span
        return b

    def add_record(self, span: StepSpan, rec: RequestRecord) -> None:
        """A successful request sent inside the step's measured time (not a warm-up one)."""
        b = self.of(span)
        if not self.keep_requests:
            b.output_tokens += rec.output_token_count
            b.chunks += len(rec.chunk_times_s)
            return
        b.add_request(rec)

    def samples(
        self, now: float, evidence: Mapping[int, ServerEvidence | None], metered: bool = True
    ) -> tuple[LevelSample, ...]:
        """Every kept step with measured requests, in order (``metered``: its tokens came
        from the load's windows, not from its chunks)."""
        out = []
        for index in sorted(self.builders):
            span, b = self.book.get(index), self.builders[index]
            if span is not None and b.e2el:
                out.append(b.sample(span, now, evidence.get(index), metered=metered))
        return tuple(out)
