"""What-if without HTTP: run the engine in virtual time under a load and report what a ``bench``
of that load would (``infmon sim --predict``).

Closed loop (``concurrency``: each user sends its next request when the previous ends) or open
loop (``rate`` requests/s, Poisson; ``inf`` sends them all at once). A request reaches the
scheduler ``request_overhead_s`` after it is sent (vLLM's API server: chat template, tokeniser),
and TTFT runs from the send. Prompts are distinct (no prefix hits) and every request produces
exactly ``output_tokens`` (``ignore_eos``), as ``vllm bench serve --dataset-name random`` does.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import asdict, dataclass

import numpy as np

from infmon.sim.engine import Engine, Sequence
from infmon.sim.roofline import EngineConfig


@dataclass(frozen=True, slots=True)
class LoadSpec:
    requests: int
    prompt_tokens: int
    output_tokens: int
    concurrency: int | None = None  # closed loop
    rate: float | None = None  # open loop, requests/s (math.inf: a burst)
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Summary:
    mean: float
    p50: float
    p99: float

    @staticmethod
    def of(values: list[float]) -> Summary:
        if not values:
            return Summary(math.nan, math.nan, math.nan)
        a = np.asarray(values) * 1e3
        return Summary(float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 99)))


@dataclass(frozen=True, slots=True)
class Prediction:
    requests: int
    duration_s: float
    output_throughput_tok_s: float
    total_throughput_tok_s: float
    ttft_ms: Summary
    tpot_ms: Summary
    kv_capacity_tokens: int
    kv_cache_gib: float
    preemptions: int
    drafts: int
    draft_tokens: int
    accepted_tokens: int

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _arrivals(load: LoadSpec) -> list[float]:
    if load.concurrency is not None:
        return [0.0] * min(load.concurrency, load.requests)
    rate = load.rate if load.rate is not None else math.inf
    if math.isinf(rate):
        return [0.0] * load.requests
    rng = random.Random(load.seed)
    t, out = 0.0, []
    for _ in range(load.requests):
        t += rng.expovariate(rate)
        out.append(t)
    return out


class _Run:
    def __init__(self, cfg: EngineConfig, load: LoadSpec) -> None:
        self.cfg, self.load = cfg, load
        self.engine = Engine(cfg)
        self.pending: list[tuple[float, int, float]] = []  # (ready_s, n, sent_s)
        self.sent = 0
        self.done: list[Sequence] = []
        self.preemptions = self.drafts = self.draft_tokens = self.accepted = 0

    def send(self, sent_s: float) -> None:
        n = self.sent
        self.sent += 1
        ready = sent_s + self.cfg.engine.request_overhead_s
        heapq.heappush(self.pending, (ready, n, sent_s))

    def admit_ready(self, now_s: float) -> None:
        p = self.load.prompt_tokens
        while self.pending and self.pending[0][0] <= now_s:
            _, n, sent_s = heapq.heappop(self.pending)
            seq = Sequence(f"p{n}", p, self.load.output_tokens, None, sent_s)
            self.engine.add(seq, [n * p + i + 1 for i in range(p)])

    def run(self) -> float:
        for t in _arrivals(self.load):
            self.send(t)
        now = 0.0
        while len(self.done) < self.load.requests:
            self.admit_ready(now)
            if not self.engine.has_work:
                if not self.pending:
                    break
                now = self.pending[0][0]
                continue
            out = self.engine.step(now)
            now = out.end_s if out.end_s > now else now + 1e-4
            self.preemptions += out.preemptions
            self.drafts += out.drafts
            self.draft_tokens += out.draft_tokens
            self.accepted += out.accepted_tokens
            for seq in out.finished:
                self.done.append(seq)
                if self.load.concurrency is not None and self.sent < self.load.requests:
                    self.send(seq.finish_s)
        return now


def predict(cfg: EngineConfig, load: LoadSpec) -> Prediction:
    run = _Run(cfg, load)
    end = run.run()
    start = min((s.arrival_s for s in run.done), default=0.0)
    span = max(end - start, 1e-9)
    out_tokens = sum(s.output_len for s in run.done)
    in_tokens = sum(s.prompt_len for s in run.done)
    ttft = [s.first_token_s - s.arrival_s for s in run.done]
    tpot = [
        (s.finish_s - s.first_token_s) / (s.output_len - 1) for s in run.done if s.output_len > 1
    ]
    mem = run.engine.budget
    return Prediction(
        requests=len(run.done),
        duration_s=span,
        output_throughput_tok_s=out_tokens / span,
        total_throughput_tok_s=(out_tokens + in_tokens) / span,
        ttft_ms=Summary.of(ttft),
        tpot_ms=Summary.of(tpot),
        kv_capacity_tokens=mem.kv_tokens,
        kv_cache_gib=mem.kv_gib,
        preemptions=run.preemptions,
        drafts=run.drafts,
        draft_tokens=run.draft_tokens,
        accepted_tokens=run.accepted,
    )


def render(pred: Prediction) -> list[str]:
    """The prediction as ``bench`` prints a step."""

    def s(x: Summary) -> str:
        return f"mean {x.mean:.2f}  p50 {x.p50:.2f}  p99 {x.p99:.2f}"

    acc = (
        f"; spec acceptance {pred.accepted_tokens / pred.draft_tokens:.3f}"
        if pred.draft_tokens
        else ""
    )
    return [
        f"requests {pred.requests} in {pred.duration_s:.2f} s (virtual time)",
        f"output {pred.output_throughput_tok_s:.1f} tok/s, total {pred.total_throughput_tok_s:.1f} tok/s",
        f"TTFT ms  {s(pred.ttft_ms)}",
        f"TPOT ms  {s(pred.tpot_ms)}",
        f"KV cache {pred.kv_capacity_tokens} tokens = {pred.kv_cache_gib:.2f} GiB; "
        f"preemptions {pred.preemptions}{acc}",
    ]
