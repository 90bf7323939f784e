"""The knee of a concurrency sweep, and the highest concurrency that still meets the SLO.

One rule, used by bench, the live pane, the sweep and every report:

- **Throughput**: the knee is the smallest concurrency past which output throughput grows by
  less than ``GROWTH_PER_DOUBLING`` (10 %) per doubling while the median end-to-end latency
  rises, and never regains that growth at higher concurrency.
- **Server evidence** (where the server publishes it): a level at which a fifth or more of the
  offered streams wait on the server (its running count capped: ``running capped at 256 while
  245 wait``), or at which the KV cache was full with preemptions, is saturated whatever the
  client's noisy throughput says; the knee is then the level before it.

The earlier of the two is the knee. It is *confirmed* when a level past it shows saturation or
a second flat doubling; until then the pane says "knee ≈ c=N (confirming)". The server's queue
is read before the client's figures are: a level too short to judge (yet, or ended so) whose
every scrape, ``EARLY_SAMPLES`` or more over ``EARLY_SPAN_S``, saw the batch full
(``queued_throughout``) names the knee before it, as confirming, confirmed once its step is
judged. Otherwise steps too short to judge (``eligible`` false) and revisits of a level are
left out: one point per level, the first eligible step at it (a queue-only point only where no
judged step holds the level). A knee the live pane showed and the figures stop holding is said
withdrawn (``KneeWatch``), with the doubling that grew. The rule reads ``KneePoint``s: a live
or bench step gives its own (``StepResult.knee_point``), a report's ``steps[]`` entry its
(``report.stepstats.knee_point``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from infmon.model.base.units import latency_text

GROWTH_PER_DOUBLING = 0.10
SLO_ATTAINMENT = 0.9
"""A step meets the SLO when at least this fraction of its requests were good."""
QUEUE_SHARE = 0.2
"""At least this share of the offered streams waiting on the server: its batch is full (the
running count stopped where max_num_seqs or the KV cache lets it)."""
QUEUE_FRACTION = 0.05
"""A queue longer than this fraction of the running count (and than one) is real queueing."""
EARLY_SAMPLES = 3
EARLY_SPAN_S = 2.0
"""A level not yet judged (``eligible`` false) may still show the server saturated: every one
of this many scrapes at least, over this span at least (after its warm-up), saw the queue. A
level's step-up queue (its new streams waiting to be admitted) drains in a few engine steps;
a queue that never once drained in two seconds is the batch being full."""
KV_FULL = 0.95
API_CPU_BUSY = 0.85
"""The API server's process at this many cores or more (``process_cpu_seconds_total``) past the
knee: its one Python event loop, which streams every token of every request, is near its limit,
and may be what flattened throughput rather than the engine (vLLM's ``--api-server-count`` runs
more of them). Said beside the knee's reason; it does not place the knee."""

NAN = math.nan


@dataclass(frozen=True, slots=True)
class KneePoint:
    """What the knee rule reads of one eligible closed-loop step."""

    concurrency: float
    tok_s: float
    e2el_p50_ms: float
    slo_attainment: float
    running: float = NAN
    waiting: float = NAN
    kv_max: float = NAN
    preemptions: float = NAN
    api_cpu: float = NAN
    """The API server's process CPU over the step, in cores (nan: not published)."""
    queue_only: bool = False
    """The server's queue alone, of a level whose step is not judged (too short yet, or ended
    so: ``queued_throughout``): no client figures; a knee it places is confirming until the
    step is judged."""

    @classmethod
    def of_queue(
        cls, concurrency: float, running: float, waiting: float, kv_max: float
    ) -> KneePoint:
        """The point of a step not judged whose every scrape saw the batch full."""
        return cls(concurrency, NAN, NAN, NAN, running, waiting, kv_max, queue_only=True)


@dataclass(frozen=True, slots=True)
class Knee:
    concurrency: int
    reason: str
    confirmed: bool
    evidence: str
    """``server`` (saturation seen on the server) or ``throughput`` (the client's curve)."""

    def to_dict(self) -> dict[str, str | int | bool]:
        return {
            "concurrency": self.concurrency,
            "reason": self.reason,
            "confirmed": self.confirmed,
            "evidence": self.evidence,
        }

    @property
    def label(self) -> str:
        return f"c={self.concurrency}" + ("" if self.confirmed else " (confirming)")


def points_of(points: Iterable[KneePoint | None]) -> list[KneePoint]:
    """One point per concurrency (the first at it, steps in order; a queue-only point only
    where no judged step holds that level), by concurrency."""
    first: dict[float, KneePoint] = {}
    for p in points:
        if p is None:
            continue
        had = first.get(p.concurrency)
        if had is None or (had.queue_only and not p.queue_only):
            first[p.concurrency] = p
    return sorted(first.values(), key=lambda p: p.concurrency)


def growth_per_doubling(c0: float, t0: float, c1: float, t1: float) -> float:
    """Throughput growth normalised to one doubling of concurrency (nan if undefined)."""
    if not (c1 > c0 > 0 and t0 > 0 and t1 >= 0):
        return math.nan
    if t1 == 0:
        return -1.0
    return float((t1 / t0) ** (1.0 / math.log2(c1 / c0)) - 1.0)


def queued(concurrency: float, running: float, waiting: float) -> bool:
    """The server's batch full at ``concurrency``: some running and a fifth or more of the
    offered streams waiting (``QUEUE_SHARE``)."""
    return running > 0 and waiting >= max(1.0, QUEUE_SHARE * concurrency)


def queued_throughout(
    concurrency: float, times_s: Sequence[float], running: Sequence[float], waiting: Sequence[float]
) -> bool:
    """Every scrape (``times_s``, with its ``running`` and ``waiting``) saw the batch full, and
    there were ``EARLY_SAMPLES`` or more over ``EARLY_SPAN_S`` or more."""
    if len(times_s) < EARLY_SAMPLES or times_s[-1] - times_s[0] < EARLY_SPAN_S:
        return False
    return all(queued(concurrency, r, w) for r, w in zip(running, waiting, strict=True))


def saturation(prev: KneePoint, cur: KneePoint) -> str | None:
    """Why the server was saturated at ``cur`` (None when it was not, or cannot tell)."""
    if queued(cur.concurrency, cur.running, cur.waiting):
        why = (
            "KV cache full"
            if cur.kv_max >= KV_FULL
            else f"max_num_seqs ≈ {max(cur.running, prev.running):.0f}"
        )
        return (
            f"running capped at {cur.running:.0f} while {cur.waiting:.0f} wait at "
            f"c={cur.concurrency:g}: {why}"
        )
    if cur.kv_max >= KV_FULL and cur.preemptions > 0:
        return (
            f"KV cache full ({cur.kv_max:.0%}) with {cur.preemptions:.0f} preemptions at "
            f"c={cur.concurrency:g}"
        )
    return None


def _throughput_knee(pts: list[KneePoint]) -> Knee | None:
    valid = [p for p in pts if not (math.isnan(p.tok_s) or math.isnan(p.e2el_p50_ms))]
    pairs = []
    for a, b in itertools.pairwise(valid):
        g = growth_per_doubling(a.concurrency, a.tok_s, b.concurrency, b.tok_s)
        flat = not math.isnan(g) and g < GROWTH_PER_DOUBLING
        pairs.append((flat, b.e2el_p50_ms > a.e2el_p50_ms, g, a, b))
    for i, (flat, rising, g, a, b) in enumerate(pairs):
        if flat and rising and all(p[0] for p in pairs[i:]):
            reason = (
                f"throughput {g:+.0%} per doubling from c={a.concurrency:g} to "
                f"c={b.concurrency:g} while median E2E latency rose "
                f"{latency_text(a.e2el_p50_ms / 1e3)} → {latency_text(b.e2el_p50_ms / 1e3)}"
            )
            return Knee(int(a.concurrency), reason, len(pairs) - i >= 2, "throughput")
    return None


def _server_knee(pts: list[KneePoint]) -> Knee | None:
    for a, b in itertools.pairwise(pts):
        why = saturation(a, b)
        if why is not None:
            return Knee(int(a.concurrency), why, not b.queue_only, "server")
    return None


def find_knee(points: Sequence[KneePoint | None]) -> Knee | None:
    """The knee (see the module docstring), or None when nothing has flattened yet."""
    return knee_of_points(points_of(points))


def knee_of_points(pts: list[KneePoint]) -> Knee | None:
    """The knee of points already one per concurrency, by concurrency (``points_of``), with
    the API server's CPU said beside its reason when it was busy past it (``API_CPU_BUSY``)."""
    knee = _knee(pts)
    if knee is None:
        return None
    busy = [p for p in pts if p.concurrency > knee.concurrency and p.api_cpu >= API_CPU_BUSY]
    if not busy:
        return knee
    p = busy[0]
    note = (
        f"; the API server's process used {p.api_cpu:.2f} cores at c={p.concurrency:g} (it "
        "streams every token in one Python process: it may be the limit, not the engine; "
        "vLLM's --api-server-count runs more)"
    )
    return replace(knee, reason=knee.reason + note)


def _knee(pts: list[KneePoint]) -> Knee | None:
    by_tput, by_server = _throughput_knee(pts), _server_knee(pts)
    if by_server is None:
        return by_tput
    if by_tput is None or by_server.concurrency <= by_tput.concurrency:
        if by_tput is not None and by_tput.concurrency == by_server.concurrency:
            reason = f"{by_server.reason}; {by_tput.reason}"
            confirmed = by_server.confirmed or by_tput.confirmed
            return Knee(by_server.concurrency, reason, confirmed, "server")
        return by_server
    return by_tput  # flat before the server saturated (two or more flat doublings: confirmed)


def slo_max_concurrency(
    points: Sequence[KneePoint | None], attainment: float = SLO_ATTAINMENT
) -> int | None:
    """Largest concurrency such that it and every lower step meet the SLO (None if none/no SLO)."""
    best: int | None = None
    for p in points_of(points):
        if p.queue_only:
            continue  # no client figures: the SLO is not judged at it
        if math.isnan(p.slo_attainment) or p.slo_attainment < attainment:
            break
        best = int(p.concurrency)
    return best


@dataclass(frozen=True, slots=True)
class Withdrawn:
    """A knee once named that the figures no longer hold: a later level regained growth, or a
    step's figures, read while it ran, moved once it had run longer."""

    knee: Knee
    why: str
    """``c=256 grew +21% per doubling from c=128``."""

    @property
    def text(self) -> str:
        mark = "" if self.knee.confirmed else "≈ "
        return f"knee {mark}c={self.knee.concurrency} withdrawn: {self.why}"


class KneeWatch:
    """The knee as the live session has shown it: remembers the last knee named, so that one
    the figures stop showing is said withdrawn (pane, events, closing summary), never silently
    dropped. A knee named at or below a withdrawn one's level (named again, or the server's
    evidence came in below it) ends the withdrawal; one named above it does not."""

    def __init__(self) -> None:
        self.named: Knee | None = None
        self.withdrawn: Withdrawn | None = None

    def update(self, knee: Knee | None, points: Sequence[KneePoint | None]) -> Withdrawn | None:
        """Take the knee of ``points`` (``find_knee``); returns a withdrawal when this update
        made one (to be said once), else None. A withdrawal stays said, its why with the
        figures as they stand, until a knee is named at or below its level."""
        named, pts = self.named, points_of(points)
        self.named = knee
        gone = self.withdrawn
        if named is not None and (knee is None or knee.concurrency > named.concurrency):
            self.withdrawn = Withdrawn(named, _why_withdrawn(named.concurrency, pts))
            return self.withdrawn
        if gone is not None and knee is not None and knee.concurrency <= gone.knee.concurrency:
            self.withdrawn = None
        elif gone is not None:
            self.withdrawn = Withdrawn(gone.knee, _why_withdrawn(gone.knee.concurrency, pts))
        return None


def _why_withdrawn(level: int, pts: list[KneePoint]) -> str:
    """What the figures say now above a withdrawn knee: the first doubling from it up that
    grew by ``GROWTH_PER_DOUBLING`` or more."""
    if not any(p.concurrency == level for p in pts):
        return f"its step at c={level} is no longer counted"
    above = [p for p in pts if p.concurrency >= level]
    for a, b in itertools.pairwise(above):
        g = growth_per_doubling(a.concurrency, a.tok_s, b.concurrency, b.tok_s)
        if not math.isnan(g) and g >= GROWTH_PER_DOUBLING:
            return f"c={b.concurrency:g} grew {g:+.0%} per doubling from c={a.concurrency:g}"
    return f"the levels from c={level} up no longer show throughput flat while latency rises"
