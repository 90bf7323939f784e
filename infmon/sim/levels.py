"""One closed-loop level (``c`` users, each sending its next request when the last ends) run
through the engine in virtual time with a fitted step cost, keeping every time as a vector.

Each step's duration is ``features(step) @ values`` (``infmon.sim.costmodel``), so every time
stamp is a sum of such vectors (plus ``request_s`` where a request waits for the API server):
TPOT, TTFT and the time per output token of a level come out as vectors ``a`` with
``a @ values`` their value. The fit solves for ``values``; a forecast's variance is
``a' Cov a``. As ``vllm bench serve`` and ``infmon bench`` do, the first wave of requests (the
ramp) is left out of the figures.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from infmon.sim.costmodel import (
    I_FRONT_STREAM,
    I_REQUEST,
    PARAMS,
    FittedCost,
    features,
)
from infmon.sim.engine import Engine, Sequence
from infmon.sim.roofline import EngineConfig

Stamps = dict[int, tuple[float, np.ndarray]]
"""Per request: a moment, as seconds and as a cost vector. The replay never changes a vector in
place (every moment's is a new array: a sum), so moments share them without copies."""
MIN_MEASURED = 16
"""Requests measured after the ramp, at least (and twice the concurrency)."""


GOLDEN = (5**0.5 - 1) / 2
"""The spread lengths' sequence: request ``n`` takes the fraction ``n·GOLDEN mod 1`` of the
range, so any run of requests covers it evenly and a replay stays the same from run to run."""


@dataclass(frozen=True, slots=True)
class Shape:
    """The load of one level: closed loop, ``ignore_eos``; every request the same size, or
    output lengths spread evenly over ``output_tokens ± output_spread`` (``infmon bench``'s
    default load varies them by ±10%, so its users drift out of step)."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()  # conditional, per draft position
    requests: int = 0  # 0: enough to measure (see MIN_MEASURED)
    output_spread: int = 0
    """Half the range of output lengths (0: every request ``output_tokens`` long)."""

    @property
    def total_requests(self) -> int:
        return self.requests or self.concurrency + max(MIN_MEASURED, 2 * self.concurrency)

    def output_of(self, n: int) -> int:
        """Request ``n``'s output length."""
        h = min(self.output_spread, self.output_tokens - 2)
        if h <= 0:
            return self.output_tokens
        return self.output_tokens - h + int((n * GOLDEN) % 1.0 * (2 * h + 1))


def output_spread(lengths: np.ndarray, mean: float) -> int:
    """The ``Shape.output_spread`` of measured output lengths: the half-range ``h`` of an even
    spread over the ``2h + 1`` lengths ``mean ± h`` with their standard deviation (its SD is
    ``√(h(h + 1)/3)``: 2 tokens for 29-35), over the lengths between their 1st and 99th
    percentiles (a stream cut short is not a spread); none where they hardly vary (SD under
    half a token: a fixed length)."""
    if len(lengths) < 2:
        return 0
    lo, hi = np.percentile(lengths, [1, 99])
    sd = float(np.std(lengths[(lengths >= lo) & (lengths <= hi)]))
    if sd < 0.5:
        return 0
    h = (math.sqrt(1 + 12 * sd * sd) - 1) / 2
    return max(0, min(round(h), round(mean) - 2))


@dataclass(frozen=True, slots=True)
class Figures:
    """A level's figures in plain numbers (seconds, tokens/s)."""

    tpot_s: float  # mean
    ttft_mean_s: float
    ttft_p50_s: float
    output_tok_s: float
    acceptance: tuple[float, ...] = ()  # per position: accepted / drafts (vLLM's counters)


@dataclass(frozen=True, slots=True)
class LevelVectors:
    """A level's figures as cost vectors over ``PARAMS`` (seconds per unit of each)."""

    tpot: np.ndarray  # mean TPOT
    ttft_p50: np.ndarray  # the median request's TTFT
    ttft_mean: np.ndarray
    time_per_token: np.ndarray  # 1 / output throughput
    batch_max: int
    preemptions: int
    queue_ttft_mean: np.ndarray
    """TTFT from the scheduler's queue to the engine's first token (vLLM's per-request
    timings): without the API server's time either side."""
    queue_ttft_p50: np.ndarray
    prefill: np.ndarray
    """Mean time from that step's start to the first token (vLLM: scheduled → first token)."""


def level_config(base: EngineConfig, cost: FittedCost, shape: Shape) -> EngineConfig:
    """``base`` priced by ``cost``, drafting as ``shape`` says (the fitted proposer)."""
    spec = shape.speculative_k > 0
    return replace(
        base,
        fitted=cost,
        spec_method="fitted" if spec else "",
        speculative_k=shape.speculative_k,
        acceptance=shape.acceptance if spec else (),
        acceptance_concentration=200.0,  # per-position rates as measured, little spread
        drafter=None,
    )


class _Replay:
    def __init__(self, cfg: EngineConfig, shape: Shape, by_kind: bool = False) -> None:
        self.cfg, self.shape, self.by_kind = cfg, shape, by_kind
        fitted = cfg.fitted
        self.values = fitted.vector if fitted is not None else np.zeros(len(PARAMS))
        self.request_s = (
            fitted.value("request_s") if fitted is not None else cfg.engine.request_overhead_s
        )
        self.stream_s = fitted.value("frontend_stream_s") if fitted is not None else 0.0
        self.api_serial = fitted is not None and fitted.api_server == "serial"
        c = shape.concurrency
        self.open_streams = fitted.open_streams(c) if fitted is not None else c - 1.0
        self.seq_exponent = fitted.seq_exponent if fitted is not None else 1.0
        self.rate = fitted is not None and fitted.growth == "rate"
        self.k = cfg.speculative_k if cfg.spec_enabled else 0
        self.engine = Engine(cfg)
        self.zero = np.zeros(len(PARAMS))
        self.unit = np.eye(len(PARAMS))
        self.pending: list[tuple[float, int]] = []  # (ready_s, n)
        self.sent: list[np.ndarray] = []
        self.sent_s: list[float] = []
        self.arrive: Stamps = {}  # at the scheduler's door (its input queue)
        self.admitted: Stamps = {}  # taken in by the engine loop, between steps (vLLM: queued)
        self.door: Stamps = {}  # arrival plus the expected wait for the step in progress
        self.last_start: tuple[float, np.ndarray] = (0.0, self.zero.copy())
        self.scheduled: Stamps = {}  # its first step starts
        self.starts: dict[float, np.ndarray] = {}  # every step's start: seconds → vector
        self.first: Stamps = {}  # token 1
        self.finish: Stamps = {}  # the last
        self.now, self.now_v = 0.0, self.zero.copy()
        self.api_free: tuple[float, np.ndarray] = (0.0, self.zero.copy())
        self.batch_max = self.preemptions = self.drafts = 0
        self.waiting: list[int] = []  # the users not started yet, wave by wave
        self.wave_every, self.steps = 1, 0
        self.accepted_per_pos: list[int] = []
        self.window: list[tuple[float, np.ndarray]] = []  # (time, vector) of the measured sends
        self.window_tokens = 0

    def send(self, at_s: float, at_v: np.ndarray) -> None:
        """A request sent at ``at``: it reaches the scheduler after the API server's
        ``request_s`` and a round of its event loop over the other users' streams (in the rate
        form: their tokens per second, one per stream at the last step's pace)."""
        n, open_streams = len(self.sent), self.open_streams
        if self.rate:
            step_s = self.now - self.last_start[0]
            others = self.shape.concurrency - 1
            open_streams = others / step_s if self.steps and step_s > 0 else 0.0
        self.sent.append(at_v)
        self.sent_s.append(at_s)
        if self.api_serial:  # one event loop: after the request it is still on
            if at_s < self.api_free[0]:
                at_s, at_v = self.api_free
            self.api_free = (at_s + self.request_s, at_v + self.unit[I_REQUEST])
        wait = self.unit[I_REQUEST] + open_streams * self.unit[I_FRONT_STREAM]
        self.arrive[n] = (at_s + self.request_s + open_streams * self.stream_s, at_v + wait)
        heapq.heappush(self.pending, (self.arrive[n][0], n))
        if n >= self.shape.concurrency:
            self.window.append((at_s, at_v))

    def admit(self) -> None:
        p = self.shape.prompt_tokens
        while self.pending and self.pending[0][0] <= self.now:
            _, n = heapq.heappop(self.pending)
            self._take_in(n)
            seq = Sequence(f"f{n}", p, self.shape.output_of(n), None, self.sent_s[n], handle=n)
            self.engine.add(seq, [n * p + i + 1 for i in range(p)])

    def _take_in(self, n: int) -> None:
        """The engine loop takes request ``n`` in at a step's end (vLLM stamps it queued
        there). A request that came while a step ran waited for that step's end: in the
        replay the point in the step where it lands is fixed by the level (the same send to
        arrival every time), where on a real server jitter spreads it over the step, so the
        wait counted is the mean, half the step (none when the engine was idle)."""
        at_s, at_v = self.arrive[n]
        self.admitted[n] = (self.now, self.now_v)
        start_s, start_v = self.last_start
        if at_s < self.now and start_s <= at_s:
            self.door[n] = (at_s + (self.now - start_s) / 2, at_v + (self.now_v - start_v) / 2)
        else:
            self.door[n] = (at_s, at_v)

    def seen_sent(self, n: int) -> tuple[float, np.ndarray]:
        """The send moment as the client's TTFT counts from it: the replay's own wait for
        the step in progress swapped for the expected one (``_take_in``)."""
        (adm_s, adm_v), (door_s, door_v) = self.admitted[n], self.door[n]
        return self.sent_s[n] + adm_s - door_s, self.sent[n] + adm_v - door_v

    def run(self) -> None:
        """The closed loop: its users start in waves (``FittedCost.wave``; unfitted, all
        together), one wave every ``output_tokens / waves`` engine steps, so alike requests
        stay in waves of that size as on the fitted server; each finished request sends the
        next."""
        total = self.shape.total_requests
        users = min(self.shape.concurrency, total)
        fitted = self.cfg.fitted
        size = fitted.wave(users) if fitted is not None else users
        self.waiting = [size] * (users // size) + ([users % size] if users % size else [])
        self.wave_every = max(1, self.shape.output_tokens // len(self.waiting))
        self._start_wave(0.0, self.zero)
        while len(self.finish) < total:
            self.admit()
            if not self.engine.has_work:
                if not self.pending and self.waiting:  # a wave due while the engine is idle
                    self._start_wave(self.now, self.now_v)
                    continue
                if not self.pending:
                    break
                self.now, self.now_v = self.arrive[self.pending[0][1]]
                continue
            self._step()

    def _start_wave(self, at_s: float, at_v: np.ndarray) -> None:
        for _ in range(self.waiting.pop(0)):
            self.send(at_s, at_v)

    def _step(self) -> None:
        self.starts[self.now] = self.now_v
        self.last_start = (self.now, self.now_v)
        out = self.engine.step(self.now)
        if out.load is not None and self.cfg.fitted is not None:
            self.now_v = self.now_v + features(
                self.values, out.load, self.k, self.by_kind, self.seq_exponent, self.rate
            )
        self.now = out.end_s if out.end_s > self.now else self.now + 1e-6
        self.steps += 1
        if self.waiting and self.steps % self.wave_every == 0:
            self._start_wave(self.now, self.now_v)
        self.batch_max = max(self.batch_max, out.running)
        self.preemptions += out.preemptions
        self.drafts += out.drafts
        for i, n in enumerate(out.accepted_per_pos):
            if i >= len(self.accepted_per_pos):
                self.accepted_per_pos.append(0)
            self.accepted_per_pos[i] += n
        if self.window and len(self.sent) < self.shape.total_requests:
            self.window_tokens += out.generation_tokens
        now = (self.now, self.now_v)
        for seq, _ in out.emitted:
            n = int(seq.handle)  # type: ignore[call-overload]
            if n not in self.first:
                self.first[n] = now
                self.scheduled[n] = (seq.scheduled_s, self.starts[seq.scheduled_s])
        for seq in out.finished:
            n = int(seq.handle)  # type: ignore[call-overload]
            self.finish[n] = now
            if len(self.sent) < self.shape.total_requests:
                self.send(*now)

    def measured(self) -> list[int]:
        c = self.shape.concurrency
        return [n for n in sorted(self.finish) if n >= c and n in self.first] or list(self.finish)

    def figures(self) -> Figures:
        """The level in plain numbers, as a bench sees it."""
        measured = self.measured()
        tpot = np.mean([(self.finish[n][0] - self.first[n][0]) / self._gaps(n) for n in measured])
        ttfts = [self.first[n][0] - self.seen_sent(n)[0] for n in measured]
        if len(self.window) >= 2 and self.window_tokens:
            tok_s = self.window_tokens / (self.window[-1][0] - self.window[0][0])
        else:
            tok_s = self._tokens() / max(t for t, _ in self.finish.values())
        acc = tuple(n / self.drafts for n in self.accepted_per_pos) if self.drafts else ()
        return Figures(
            float(tpot),
            float(np.mean(ttfts)),
            float(np.percentile(ttfts, 50)),
            tok_s,
            acc,
        )

    def _gaps(self, n: int) -> int:
        """Request ``n``'s gaps between tokens (its TPOT's divisor)."""
        return max(self.shape.output_of(n) - 1, 1)

    def _tokens(self) -> int:
        return sum(self.shape.output_of(n) for n in self.finish)

    def vectors(self) -> LevelVectors:
        measured = self.measured()
        sent = {n: self.seen_sent(n) for n in measured}
        ttft_mean, ttft_p50 = _spans(sent, self.first, measured)
        queue_mean, queue_p50 = _spans(self.admitted, self.first, measured)
        prefills = _spans(self.scheduled, self.first, measured)[0]
        if len(self.window) >= 2 and self.window_tokens:
            span = self.window[-1][1] - self.window[0][1]
            per_token = span / self.window_tokens
        else:  # too few requests for a window: the whole run
            end = max(self.finish.values(), key=lambda sv: sv[0])[1]
            per_token = end / max(1, self._tokens())
        tpot = np.mean(
            [(self.finish[n][1] - self.first[n][1]) / self._gaps(n) for n in measured], 0
        )
        return LevelVectors(
            tpot=tpot,
            ttft_p50=ttft_p50,
            ttft_mean=ttft_mean,
            time_per_token=per_token,
            batch_max=self.batch_max,
            preemptions=self.preemptions,
            queue_ttft_mean=queue_mean,
            queue_ttft_p50=queue_p50,
            prefill=prefills,
        )


def _spans(start: Stamps, end: Stamps, which: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """From ``start`` to ``end`` over the requests ``which``: the mean vector, and the vector of
    the median request (by time)."""
    order = sorted(which, key=lambda n: end[n][0] - start[n][0])
    mid = order[(len(order) - 1) // 2]
    mean = np.mean([end[n][1] - start[n][1] for n in which], 0)
    return mean, end[mid][1] - start[mid][1]


def measure(cfg: EngineConfig, shape: Shape) -> Figures:
    """A level of any engine config (the roofline too) measured as a bench would, after the
    ramp."""
    run = _Replay(cfg, shape)
    run.run()
    return run.figures()


def replay(
    base: EngineConfig, cost: FittedCost, shape: Shape, by_kind: bool = False
) -> LevelVectors:
    """Run one level under ``cost``; its figures as vectors (``vectors @ cost.vector``, the
    level's figures, unless ``by_kind`` prices steps by kind: ``costmodel.features``)."""
    run = _Replay(level_config(base, cost, shape), shape, by_kind)
    run.run()
    return run.vectors()
