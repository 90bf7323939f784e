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
from dataclasses import dataclass, replace

import numpy as np

from infmon.sim.costmodel import I_REQUEST, PARAMS, FittedCost, features
from infmon.sim.engine import Engine, Sequence
from infmon.sim.roofline import EngineConfig

MIN_MEASURED = 16
"""Requests measured after the ramp, at least (and twice the concurrency)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """The load of one level: closed loop, every request the same size (``ignore_eos``)."""

    concurrency: int
    prompt_tokens: int
    output_tokens: int
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()  # conditional, per draft position
    requests: int = 0  # 0: enough to measure (see MIN_MEASURED)

    @property
    def total_requests(self) -> int:
        return self.requests or self.concurrency + max(MIN_MEASURED, 2 * self.concurrency)


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
        self.values = cfg.fitted.vector if cfg.fitted is not None else np.zeros(len(PARAMS))
        self.request_s = (
            cfg.fitted.value("request_s")
            if cfg.fitted is not None
            else cfg.engine.request_overhead_s
        )
        self.k = cfg.speculative_k if cfg.spec_enabled else 0
        self.engine = Engine(cfg)
        self.zero = np.zeros(len(PARAMS))
        self.request = np.zeros(len(PARAMS))
        self.request[I_REQUEST] = 1.0
        self.pending: list[tuple[float, int]] = []  # (ready_s, n)
        self.sent: list[np.ndarray] = []
        self.first: dict[int, np.ndarray] = {}
        self.finish: dict[int, np.ndarray] = {}
        self.finish_s: dict[int, float] = {}
        self.first_s: dict[int, float] = {}
        self.sent_s: list[float] = []
        self.now, self.now_v = 0.0, self.zero.copy()
        self.batch_max = self.preemptions = self.drafts = 0
        self.accepted_per_pos: list[int] = []
        self.window: list[tuple[float, np.ndarray]] = []  # (time, vector) of the measured sends
        self.window_tokens = 0

    def send(self, at_s: float, at_v: np.ndarray) -> None:
        n = len(self.sent)
        self.sent.append(at_v.copy())
        self.sent_s.append(at_s)
        heapq.heappush(self.pending, (at_s + self.request_s, n))
        if n >= self.shape.concurrency:
            self.window.append((at_s, at_v.copy()))

    def admit(self) -> None:
        p, o = self.shape.prompt_tokens, self.shape.output_tokens
        while self.pending and self.pending[0][0] <= self.now:
            _, n = heapq.heappop(self.pending)
            seq = Sequence(f"f{n}", p, o, None, self.sent_s[n], handle=n)
            self.engine.add(seq, [n * p + i + 1 for i in range(p)])

    def run(self) -> None:
        total = self.shape.total_requests
        for _ in range(min(self.shape.concurrency, total)):
            self.send(0.0, self.zero)
        while len(self.finish) < total:
            self.admit()
            if not self.engine.has_work:
                if not self.pending:
                    break
                ready, n = self.pending[0]
                self.now, self.now_v = ready, self.sent[n] + self.request
                continue
            self._step()

    def _step(self) -> None:
        out = self.engine.step(self.now)
        if out.load is not None and self.cfg.fitted is not None:
            self.now_v = self.now_v + features(self.values, out.load, self.k, self.by_kind)
        self.now = out.end_s if out.end_s > self.now else self.now + 1e-6
        self.batch_max = max(self.batch_max, out.running)
        self.preemptions += out.preemptions
        self.drafts += out.drafts
        for i, n in enumerate(out.accepted_per_pos):
            if i >= len(self.accepted_per_pos):
                self.accepted_per_pos.append(0)
            self.accepted_per_pos[i] += n
        if self.window and len(self.sent) < self.shape.total_requests:
            self.window_tokens += out.generation_tokens
        for seq, _ in out.emitted:
            n = int(seq.handle)  # type: ignore[call-overload]
            if n not in self.first:
                self.first[n], self.first_s[n] = self.now_v.copy(), self.now - self.sent_s[n]
        for seq in out.finished:
            n = int(seq.handle)  # type: ignore[call-overload]
            self.finish[n], self.finish_s[n] = self.now_v.copy(), self.now
            if len(self.sent) < self.shape.total_requests:
                self.send(self.now, self.now_v)

    def measured(self) -> list[int]:
        c = self.shape.concurrency
        return [n for n in sorted(self.finish) if n >= c and n in self.first] or list(self.finish)

    def figures(self) -> Figures:
        """The level in plain numbers, as a bench sees it."""
        o, measured = self.shape.output_tokens, self.measured()
        tpot = float(
            np.mean([(self.finish_s[n] - self.sent_s[n] - self.first_s[n]) for n in measured])
        ) / max(o - 1, 1)
        ttfts = [self.first_s[n] for n in measured]
        if len(self.window) >= 2 and self.window_tokens:
            tok_s = self.window_tokens / (self.window[-1][0] - self.window[0][0])
        else:
            tok_s = o * len(self.finish) / max(self.finish_s.values())
        acc = tuple(n / self.drafts for n in self.accepted_per_pos) if self.drafts else ()
        return Figures(tpot, float(np.mean(ttfts)), float(np.percentile(ttfts, 50)), tok_s, acc)

    def vectors(self) -> LevelVectors:
        o, measured = self.shape.output_tokens, self.measured()
        ttfts = {n: self.first[n] - self.sent[n] for n in measured}
        order = sorted(measured, key=lambda n: self.first_s[n])
        mid = order[(len(order) - 1) // 2]
        tpot = np.mean([(self.finish[n] - self.first[n]) / max(o - 1, 1) for n in measured], 0)
        if len(self.window) >= 2 and self.window_tokens:
            span = self.window[-1][1] - self.window[0][1]
            per_token = span / self.window_tokens
        else:  # too few requests for a window: the whole run
            end = max(self.finish.values(), key=lambda v: float(v @ self.values))
            per_token = end / max(1, o * len(self.finish))
        return LevelVectors(
            tpot=tpot,
            ttft_p50=ttfts[mid],
            ttft_mean=np.mean(list(ttfts.values()), 0),
            time_per_token=per_token,
            batch_max=self.batch_max,
            preemptions=self.preemptions,
        )


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
