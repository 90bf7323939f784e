"""The monitor's ``w`` with ``--search``: the load search of ``policy.py`` (the one bench
runs) driven by the live steps instead of bench's plan.

Each probe is a live step at the level the policy asks for. Once it has measured ``step_s``
(or, never clean, been held twice that), a new step begins **at the same level**: the probe's
step ends, the requests it sent finish under the same load, and the ledger settles it (as
bench's drain does, without stopping the load). Only then is its settled result read
(``level_fit.probe_of``) and the policy asked for the next move, so a probe never leaves out
its slowest requests. The verdict holds the level found. Pure: the controller applies the moves.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from infmon.model.records.measures import SLO
from infmon.model.search.frontier import FrontierView, frontier_view
from infmon.model.search.level_fit import Probe, probe_of
from infmon.model.search.policy import Next, SearchSpec, Verdict, next_move
from infmon.model.search.search_json import SearchDoc, search_doc, verdict_line
from infmon.model.steps.knee import KneePoint, points_of
from infmon.model.steps.result import StepResult

NEVER_CLEAN_STEPS = 2.0
"""A step never clean (still settling) ends after this many ``step_s`` (a transition)."""


@dataclass(frozen=True, slots=True)
class LiveMove:
    """What the controller does next: begin a step at ``level`` (``probe``: a measured probe;
    else the same level again, so the probe's step ends and settles), or end with ``verdict``."""

    level: float | None
    probe: bool
    note: str
    verdict: Verdict | None = None
    hold: float | None = None
    """The level to hold after the verdict (the level found), None: keep the current one."""


@dataclass(slots=True)
class LiveSearch:
    """One search in the monitor (see the module docstring)."""

    spec: SearchSpec
    slo: SLO
    step_s: float
    probes: list[Probe] = field(default_factory=list)
    knee: list[KneePoint] = field(default_factory=list)
    measuring: int | None = None
    """The step index of the probe being measured."""
    closing: int | None = None
    """The probe's step, ended, until the ledger settles it."""
    level: float = math.nan

    def start(self) -> LiveMove:
        return self._move()

    def started(self, index: int, probe: bool) -> None:
        """The controller began step ``index`` for the last move."""
        if probe:
            self.measuring = index

    def tick(self, results: Mapping[int, StepResult], now: float) -> LiveMove | None:
        """The next move once the probe has measured enough and then settled; else None."""
        if self.closing is not None:
            done = results.get(self.closing)
            if done is None or not done.settled:
                return None
            self.closing = None
            self.probes.append(probe_of(done, self.slo, self.spec.attainment))
            self.knee.extend(points_of([done.knee_point]))
            return self._move()
        cur = results.get(self.measuring) if self.measuring is not None else None
        if cur is None or not self._measured(cur, now):
            return None
        self.closing, self.measuring = self.measuring, None
        return LiveMove(self.level, False, f"search: {self._label(self.level)} measured; settling")

    def _measured(self, r: StepResult, now: float) -> bool:
        span = r.span
        if span.settling:
            return span.held_s(now) >= NEVER_CLEAN_STEPS * self.step_s
        return span.measured_s(now) >= self.step_s

    def _move(self) -> LiveMove:
        move = next_move(self.spec, self.probes, self.knee)
        if isinstance(move, Next):
            self.level = move.level
            n = len(self.probes) + 1
            note = f"search {n}/{self.spec.budget}: {self._label(move.level)} — {move.why}"
            return LiveMove(move.level, True, note)
        return self._verdict(move)

    def _verdict(self, v: Verdict) -> LiveMove:
        hold = v.found.level if v.found is not None else None
        return LiveMove(None, False, verdict_line(self.spec, self.slo, v), v, hold)

    def _label(self, level: float) -> str:
        return f"c={level:g}" if self.spec.integer else f"{level:g} req/s"

    def doc(self, v: Verdict) -> SearchDoc:
        """``search.json``'s document for the verdict (journalled as ``search_verdict``)."""
        return search_doc(self.spec, self.slo, v, self.probes)

    def frontier(self, verdict: str = "") -> FrontierView:
        """The probes so far as the frontier chart's points (``verdict``: why it ended)."""
        unit = "c=" if self.spec.integer else ""
        return frontier_view(
            self.spec.goal, self.probes, self.slo, self.spec.attainment, unit, verdict
        )

    def progress(self) -> str:
        """``search 3/12 · c=64 · measuring`` for the header's sweep line."""
        phase = "settling" if self.closing is not None else "measuring"
        n = len(self.probes) + (self.closing is None)
        return f"search {n}/{self.spec.budget} · {self._label(self.level)} · {phase}"
