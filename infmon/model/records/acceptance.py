"""Per-request speculative-decoding acceptance, by workload task kind and by prompt length.

Each request's own figures (vLLM ``--per-request-spec-decode-metrics``) say how well the
drafter fits what that request asked: acceptance is pooled within a group as vLLM pools its
counters (accepted draft tokens / drafted tokens; mean acceptance length = 1 + accepted /
verify steps), and its spread over the group's requests is given as p10/p50/p90 of the
per-request rates. The drafter's fit names the best- and worst-fitting task kinds.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from infmon.model.records.columns import MISSING, RecordColumns

MIN_REQUESTS = 5
"""A group with fewer requests that drafted is listed but never named best or worst."""
FIT_GAP = 0.05
"""Best minus worst acceptance below this: the drafter fits every kind alike."""
LENGTH_EDGES = (128, 512, 2048)
"""Prompt-length groups: < 128, 128–511, 512–2047, ≥ 2048 tokens."""


@dataclass(frozen=True, slots=True)
class AcceptanceGroup:
    name: str
    requests: int
    """Requests that drafted at least once."""
    drafted: int
    accepted: int
    steps: int
    rate: float
    """Pooled: accepted / drafted."""
    mean_length: float
    """1 + accepted / steps."""
    p10: float
    p50: float
    p90: float
    """Of the per-request rates."""


@dataclass(frozen=True, slots=True)
class DrafterFit:
    best: AcceptanceGroup
    worst: AcceptanceGroup

    def text(self) -> str:
        if self.best.rate - self.worst.rate < FIT_GAP:
            return (
                f"the drafter fits every task kind alike: acceptance {self.worst.rate:.2f}–"
                f"{self.best.rate:.2f} ({self.worst.name} … {self.best.name})"
            )
        return (
            f"acceptance {self.best.rate:.2f} on {self.best.name}, {self.worst.rate:.2f} on "
            f"{self.worst.name}: the drafter fits {self.best.name}"
        )


def _group(
    name: str, drafted: np.ndarray, accepted: np.ndarray, steps: np.ndarray
) -> AcceptanceGroup:
    d, a, s = int(drafted.sum()), int(accepted.sum()), int(steps.sum())
    rates = accepted / drafted
    p10, p50, p90 = (float(x) for x in np.percentile(rates, [10, 50, 90]))
    return AcceptanceGroup(
        name,
        int(drafted.size),
        d,
        a,
        s,
        a / d,
        1 + a / s if s else math.nan,
        p10,
        p50,
        p90,
    )


def _spec(cols: RecordColumns) -> tuple[np.ndarray, ...] | None:
    srv = cols.server
    if srv is None:
        return None
    has = cols.ok & np.isfinite(srv.spec_drafted) & (srv.spec_drafted > 0)
    if not has.any():
        return None
    return has, srv.spec_drafted, srv.spec_accepted, srv.spec_steps


def by_task(cols: RecordColumns) -> tuple[AcceptanceGroup, ...]:
    """One group per task kind (``unknown`` where the workload did not say), most requests first."""
    spec = _spec(cols)
    if spec is None or cols.server is None:
        return ()
    has, drafted, accepted, steps = spec
    out = []
    for code, task in enumerate(cols.server.tasks):
        sel = has & (cols.server.task_code == code)
        if sel.any():
            out.append(_group(task or "unknown", drafted[sel], accepted[sel], steps[sel]))
    return tuple(sorted(out, key=lambda g: -g.requests))


def by_prompt_length(cols: RecordColumns) -> tuple[AcceptanceGroup, ...]:
    spec = _spec(cols)
    if spec is None:
        return ()
    has, drafted, accepted, steps = spec
    prompt = cols.prompt_tokens
    edges = (0, *LENGTH_EDGES, math.inf)
    out = []
    for lo, hi in itertools.pairwise(edges):
        sel = has & (prompt != MISSING) & (prompt >= lo) & (prompt < hi)
        if sel.any():
            name = f"{lo:g}–{hi - 1:g} tokens" if hi < math.inf else f"≥ {lo:g} tokens"
            out.append(_group(name, drafted[sel], accepted[sel], steps[sel]))
    return tuple(out)


def drafter_fit(groups: tuple[AcceptanceGroup, ...]) -> DrafterFit | None:
    """The best- and worst-fitting task kinds (known kinds with enough requests); None when
    fewer than two qualify."""
    named = [g for g in groups if g.requests >= MIN_REQUESTS and g.name != "unknown"]
    if len(named) < 2:
        return None
    ranked = sorted(named, key=lambda g: g.rate)
    return DrafterFit(best=ranked[-1], worst=ranked[0])
