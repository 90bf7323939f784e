"""The bench's step plan, run through the load engine and the one step model.

A step: the level is applied and a warm-up runs (requests sent then are excluded from the
step's latencies); then the step measures for ``duration_s``, or until exactly
``max_requests`` measured requests were sent (as ``vllm bench serve --num-prompts`` sends
exactly that many; the duration then does not cut it short); then the load pauses and the
step's requests finish, so no request straddles two levels. Its throughput counts the output
tokens whose chunks arrived inside the measured time; a step limited by request count
measures until its last request ended (vLLM's benchmark duration). The server is scraped at
the edges of the measured time, so each step also has the server's own generation rate over
the same window.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from infmon.clock import Clock
from infmon.config import Config
from infmon.engine.controller import LoadEngine
from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import Probe, probe_of
from infmon.model.search.policy import Next, SearchSpec, Verdict, next_move
from infmon.model.server.snapshot import ServerSnapshot
from infmon.model.steps.knee import KneePoint, points_of
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.result import StepResult
from infmon.model.steps.span import CLOSED, RATE, REPLAY, Level, StepEvent


@dataclass(frozen=True, slots=True)
class StepSpec:
    """One load level of a bench plan."""

    concurrency: int | None = None
    rate: float | None = None
    duration_s: float = 20.0
    warmup_s: float = 2.0
    max_requests: int | None = None
    replay: bool = False
    """Send at the times of the run's trace or schedule until its arrivals are over."""

    @property
    def level(self) -> Level:
        if self.replay:
            return Level(REPLAY, 0.0)
        if self.concurrency is not None:
            return Level(CLOSED, self.concurrency)
        assert self.rate is not None
        return Level(RATE, self.rate)

    @property
    def label(self) -> str:
        return self.level.label


@dataclass(frozen=True, slots=True)
class StepProgress:
    """A heartbeat while a step runs (the progress line)."""

    index: int
    total: int
    spec: StepSpec
    phase: str
    """``warmup``, ``measure`` or ``drain``."""
    elapsed_s: float
    finished: int
    failed: int
    backoff: str | None = None


@dataclass(frozen=True, slots=True)
class EdgeRate:
    """The server's generation tokens/s between the scrapes at a step's two edges."""

    tokens_per_s: float | None
    window_s: float | None


def plan_from_config(config: Config) -> list[StepSpec]:
    """The steps a config asks for (concurrency steps, else rate steps, else c=1)."""
    base = StepSpec(
        duration_s=config.step_duration_s,
        warmup_s=config.effective_warmup_s,
        max_requests=config.step_requests,
    )
    if config.trace or config.schedule:
        return [replace(base, warmup_s=config.warmup_s or 0.0, replay=True)]
    if config.rate and not config.concurrency:
        return [replace(base, rate=r) for r in config.rate]
    return [replace(base, concurrency=c) for c in (config.concurrency or (1,))]


def edge_rate(first: ServerSnapshot | None, last: ServerSnapshot | None) -> EdgeRate:
    if first is None or last is None or not (first.ok and last.ok) or last.server_restarted:
        return EdgeRate(None, None)
    a, b = first.generation_tokens_total, last.generation_tokens_total
    span = last.timestamp_s - first.timestamp_s
    if a is None or b is None or b < a or span <= 0:
        return EdgeRate(None, None)
    return EdgeRate((b - a) / span, span)


class StepRunner:
    """Runs a plan: the engine, the ledger and the journal see every step change alike."""

    def __init__(
        self,
        engine: LoadEngine,
        ledger: StepLedger,
        clock: Clock,
        *,
        on_events: Callable[[list[StepEvent]], None],
        scrape_edge: Callable[[], Awaitable[ServerSnapshot | None]] | None = None,
        counts: Callable[[int], tuple[int, int]] = lambda index: (0, 0),
        tick_s: float = 1.0,
        drain_timeout_s: float = 120.0,
        retakes: int = 0,
        realtime_wait: Callable[[], float] = lambda: 0.0,
        on_retake: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.engine, self.ledger, self.clock = engine, ledger, clock
        self.on_events = on_events
        self.scrape_edge = scrape_edge
        self.counts = counts
        self.tick_s = tick_s
        self.drain_timeout_s = drain_timeout_s
        self.retakes = retakes
        """``--retake N``: a step the client self-check flagged is run again, N times in a run."""
        self.retaken = 0
        self.realtime_wait = realtime_wait
        """Seconds until the load thread, out of real time for a starvation, takes it again."""
        self.on_retake = on_retake

    def _apply(self, events: list[StepEvent]) -> None:
        self.ledger.apply(events)
        self.on_events(events)

    async def _edge(self) -> ServerSnapshot | None:
        return await self.scrape_edge() if self.scrape_edge is not None else None

    async def run(
        self,
        plan: Sequence[StepSpec],
        on_step: Callable[[int, StepSpec, StepResult, EdgeRate], None] | None = None,
        on_tick: Callable[[StepProgress], None] | None = None,
    ) -> list[tuple[StepResult, EdgeRate]]:
        out: list[tuple[StepResult, EdgeRate]] = []
        for spec in plan:
            await self._taken(out, len(plan), spec, on_step, on_tick)
        return out

    async def rounds(
        self,
        plan: Sequence[StepSpec],
        repeat: int,
        until: Callable[[list[StepResult]], bool] | None = None,
        on_step: Callable[[int, StepSpec, StepResult, EdgeRate], None] | None = None,
        on_tick: Callable[[StepProgress], None] | None = None,
    ) -> list[tuple[StepResult, EdgeRate]]:
        """The plan run ``repeat`` times in rounds (levels interleaved, so a drift of the
        server spreads over every level alike); after a round ``until`` may end it early."""
        out: list[tuple[StepResult, EdgeRate]] = []
        for _ in range(repeat):
            for spec in plan:
                await self._taken(out, len(plan) * repeat, spec, on_step, on_tick)
            if until is not None and until([r for r, _ in out]):
                break
        return out

    async def _taken(
        self,
        out: list[tuple[StepResult, EdgeRate]],
        total: int,
        spec: StepSpec,
        on_step: Callable[[int, StepSpec, StepResult, EdgeRate], None] | None,
        on_tick: Callable[[StepProgress], None] | None,
    ) -> None:
        """A plan's step, and its retakes while ``retakes`` are left: a step whose timestamps
        the client self-check found late (the host starved the client) is run again at once, or
        when the load thread is back in real time if a starvation beside it took it out."""
        while True:
            result, rate = await self._one(len(out), total + self.retaken, spec, on_tick)
            out.append((result, rate))
            if on_step is not None:
                on_step(len(out) - 1, spec, result, rate)
            if not result.stats.client_late or self.retaken >= self.retakes:
                return
            self.retaken += 1
            wait_s = self.realtime_wait()
            self.on_retake(
                f"retake {self.retaken} of {self.retakes}: step {len(out)} ({spec.label}) again, "
                "its client timestamps were late"
                + (
                    f", once the load thread is back in real time (~{wait_s:.0f} s)"
                    if wait_s > 0
                    else ""
                )
            )
            while (wait_s := self.realtime_wait()) > 0:
                await asyncio.sleep(min(wait_s, self.tick_s))

    async def search(
        self,
        goal: SearchSpec,
        base: StepSpec,
        slo: SLO | None,
        on_step: Callable[[int, StepSpec, StepResult, EdgeRate], None] | None = None,
        on_tick: Callable[[StepProgress], None] | None = None,
        on_move: Callable[[Next, list[Probe]], None] | None = None,
    ) -> tuple[Verdict, list[tuple[StepResult, EdgeRate]], list[Probe]]:
        """Bench's search plan: each probe an ordinary step at the level the pure policy
        (``model/search/policy.py``) asks for, its figures the ledger's settled result."""
        out: list[tuple[StepResult, EdgeRate]] = []
        probes: list[Probe] = []
        knee: list[KneePoint] = []
        while isinstance(move := next_move(goal, probes, knee), Next):
            if on_move is not None:
                on_move(move, probes)
            if goal.integer:
                spec = replace(base, concurrency=int(move.level), rate=None)
            else:
                spec = replace(base, concurrency=None, rate=move.level)
            result, rate = await self._one(len(out), goal.budget, spec, on_tick)
            out.append((result, rate))
            probes.append(probe_of(result, slo, goal.attainment))
            knee.extend(points_of([result.knee_point]))
            if on_step is not None:
                on_step(len(out) - 1, spec, result, rate)
        return move, out, probes

    async def _one(
        self, i: int, total: int, spec: StepSpec, on_tick: Callable[[StepProgress], None] | None
    ) -> tuple[StepResult, EdgeRate]:
        clock, engine = self.clock, self.engine
        t0 = clock.now()
        inflight = self.ledger.inflight()  # drained: clean at once (unless the drain timed out)
        self._apply(self.ledger.book.begin(spec.level, t0, "bench", spec.warmup_s, inflight))
        index = self.ledger.book.next_index - 1
        engine.set_level(index, spec.level, t0 + spec.warmup_s)
        engine.limit_sends(spec.max_requests)  # before resume: no measured send slips past it
        engine.resume(t0 + spec.warmup_s)

        def tick(phase: str) -> None:
            if on_tick is not None:
                done, failed = self.counts(index)
                note = next((b for b in engine.backoff.values() if b), None)
                progress = StepProgress(i, total, spec, phase, clock.now() - t0, done, failed, note)
                on_tick(progress)

        await _hold(clock, t0 + spec.warmup_s, self.tick_s, lambda: tick("warmup"))
        engine.flush()
        first = asyncio.ensure_future(
            self._edge()
        )  # scraped meanwhile: a slow page never holds the step
        if spec.replay:
            measure = asyncio.ensure_future(engine.arrivals_done())
            await _hold(clock, float("inf"), self.tick_s, lambda: tick("measure"), measure)
        elif spec.max_requests is not None:
            measure = asyncio.ensure_future(engine.budget_spent())
            await _hold(clock, float("inf"), self.tick_s, lambda: tick("measure"), measure)
        else:
            await _hold(
                clock, t0 + spec.warmup_s + spec.duration_s, self.tick_s, lambda: tick("measure")
            )
        engine.pause()
        t_end = clock.now()
        until_last = spec.max_requests is not None or spec.replay
        ended: list[StepEvent] = []
        try:
            if not until_last:
                ended = self.ledger.book.end(t_end)
                self.ledger.apply(ended)  # chunks after this are not the step's
                last = asyncio.ensure_future(self._edge())
            tick("drain")
            await engine.wait_idle(self.drain_timeout_s)
            if until_last:  # measured until the last request ended: the server's edge is too
                ended = self.ledger.book.end(max(t_end, self.ledger.last_end(index)))
                self.ledger.apply(ended)
                last = asyncio.ensure_future(self._edge())
        finally:
            # told (journaled, with the client check) after the drain: the load's windows over
            # the step's last moments have come in by then, a starved worker's late ones too,
            # and the settled result below reads the same windows: one verdict for both
            self.on_events(ended)
        self.ledger.settle(index)
        result = next(r for r in self.ledger.settled_results() if r.index == index)
        return result, edge_rate(*await _edges(first, last, grace_s=EDGE_GRACE_S))


EDGE_GRACE_S = 1.0
"""How long a step waits, after its drain, for its edge scrapes (a slow page gives no rate)."""


async def _edges(
    *scrapes: asyncio.Future[ServerSnapshot | None], grace_s: float
) -> list[ServerSnapshot | None]:
    await asyncio.wait(scrapes, timeout=grace_s)
    out = []
    for fut in scrapes:
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            out.append(fut.result())
        else:
            fut.cancel()
            out.append(None)
    return out


async def _hold(
    clock: Clock,
    until_s: float,
    tick_s: float,
    tick: Callable[[], None],
    stop: asyncio.Future[None] | None = None,
) -> None:
    """Wait until ``until_s`` on the injected clock, ticking; end early when ``stop`` is done."""
    next_tick = clock.now() + tick_s
    while (remaining := until_s - clock.now()) > 0 and not (stop is not None and stop.done()):
        wait_s = min(remaining, max(0.0, next_tick - clock.now()))
        if stop is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(stop), wait_s)
        else:
            await asyncio.sleep(wait_s)
        if clock.now() >= next_tick:
            tick()
            next_tick += tick_s
