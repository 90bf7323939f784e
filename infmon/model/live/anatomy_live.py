"""The live latency anatomy: each step's requests split by the server's own figures.

The monitor's session feeds every finished record (``add``); the latency pane renders
``view()``: per step, the median and p90 of each part of E2E (``infmon.model.records.anatomy``), the
requests with the largest client-side share, and the self-check. Memory is bounded: the last
``MAX_PER_STEP`` measured requests of the last ``MAX_STEPS`` steps.
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass

from infmon.model.records.anatomy import Anatomy, Unexplained, anatomy, client_growth, split_records
from infmon.model.records.request import RequestRecord

MAX_STEPS = 8
MAX_PER_STEP = 2048
ROWS_SHOWN = 6


@dataclass(frozen=True, slots=True)
class AnatomyRow:
    step: int
    label: str
    """The step's level: ``c=8`` or ``r=4``."""
    anatomy: Anatomy


@dataclass(frozen=True, slots=True)
class AnatomyView:
    """What the latency pane's anatomy view renders (frozen: equal views do not repaint)."""

    rows: tuple[AnatomyRow, ...] = ()
    """The first step (the low-load reference) and the most recent ones, oldest first."""
    top: tuple[Unexplained, ...] = ()
    """The latest step's requests with the largest client-side share."""
    growth: str | None = None
    """The self-check, conclusion first (``ClientGrowth.short``): the client-side share grows
    with load, and where (None: it does not)."""
    without: int = 0
    """Successful requests that carried no server figures (this server sends none)."""


def _label(rec: RequestRecord) -> tuple[str, float]:
    if rec.concurrency is not None:
        return f"c={rec.concurrency}", float(rec.concurrency)
    if rec.rate is not None:
        return f"r={rec.rate:g}", rec.rate
    return "–", float("nan")


class AnatomyBook:
    """Per step, the measured requests (warm-up excluded) with or without server figures."""

    def __init__(self) -> None:
        self._steps: OrderedDict[int, deque[RequestRecord]] = OrderedDict()
        self._levels: dict[int, tuple[str, float]] = {}
        self._without = 0
        self._view: AnatomyView | None = AnatomyView()
        self._server_ttft_s: dict[int, float] = {}

    def add(self, rec: RequestRecord) -> None:
        if not rec.ok or rec.warmup:
            return
        if rec.server is None:
            self._without += 1
            self._view = None
            return
        step = self._steps.get(rec.step)
        if step is None:
            step = self._steps[rec.step] = deque(maxlen=MAX_PER_STEP)
            self._levels[rec.step] = _label(rec)
            while len(self._steps) > MAX_STEPS:  # the first step stays: the low-load reference
                old = list(self._steps)[1]
                del self._steps[old]
                self._levels.pop(old, None)
        step.append(rec)
        self._view = None

    def view(self, server_ttft_s: Mapping[int, float] | None = None) -> AnatomyView:
        """Recomputed only after new records or new ``server_ttft_s`` (the session asks once a
        second): each settled step's server TTFT histogram mean (its evidence), which splits
        the front in the self-check (``infmon.model.records.anatomy.FrontSplit``)."""
        ttft = dict(server_ttft_s or {})
        if ttft != self._server_ttft_s:
            self._server_ttft_s, self._view = ttft, None
        if self._view is None:
            self._view = self._build()
        return self._view

    def _build(self) -> AnatomyView:
        rows = []
        for index, recs in self._steps.items():
            a = anatomy(split_records(list(recs)))
            if a is not None:
                rows.append(AnatomyRow(index, self._levels[index][0], a))
        loaded = [(x, r) for r in rows if (x := self._levels[r.step][1]) == x]
        growth = client_growth(
            [(x, r.anatomy) for x, r in loaded],
            [1e3 * self._server_ttft_s.get(r.step, math.nan) for _, r in loaded],
        )
        return AnatomyView(
            rows=tuple(rows if len(rows) <= ROWS_SHOWN else rows[:1] + rows[1 - ROWS_SHOWN :]),
            top=rows[-1].anatomy.top if rows else (),
            growth=growth.short() if growth else None,
            without=self._without,
        )
