"""A scripted stream client for the load engine in process: real timestamps, chunks at a fixed
inter-token gap, usage at the end, so records are as the HTTP client makes them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from infmon.clock import Clock, MonotonicClock
from infmon.load.stream_state import TokenMeter
from infmon.model.records.request import ErrorKind, RequestRecord


@dataclass(frozen=True)
class Caps:
    stream_options: bool = True
    vllm_fields: bool = True
    per_request_metrics: bool = False


class ScriptedClient:
    """TTFT ``ttft_s``, then one token every ``itl_s``; every ``fail_every``-th request resets."""

    model = "scripted"

    def __init__(
        self,
        config=None,
        clock: Clock | None = None,
        *,
        ttft_s: float = 0.01,
        itl_s: float = 0.002,
        fail_every: int = 0,
    ) -> None:
        self.clock = clock or MonotonicClock()
        self.ttft_s, self.itl_s, self.fail_every = ttft_s, itl_s, fail_every
        self.meter = TokenMeter()
        self.capabilities = Caps()

    async def resolve_model(self) -> str:
        return self.model

    async def detect_capabilities(self) -> Caps:
        return self.capabilities

    async def aclose(self) -> None:
        return None

    async def stream(
        self,
        rid,
        prompt,
        out,
        *,
        on_cancel=None,
        step=0,
        concurrency=None,
        rate=None,
        warmup=False,
        **kw,
    ) -> RequestRecord:
        label = {"step": step, "concurrency": concurrency, "rate": rate, "warmup": warmup}
        sent = self.clock.now()
        times: list[float] = []
        try:
            await asyncio.sleep(self.ttft_s)
            for i in range(out):
                if i:
                    await asyncio.sleep(self.itl_s)
                times.append(self.clock.now())
                self.meter.tokens += 1
        except asyncio.CancelledError:
            if on_cancel:
                on_cancel(
                    RequestRecord(
                        rid,
                        sent,
                        tuple(times),
                        self.clock.now(),
                        error_kind=ErrorKind.CANCELLED,
                        **label,
                    )
                )
            raise
        if self.fail_every and rid % self.fail_every == 0:
            return RequestRecord(
                rid,
                sent,
                tuple(times),
                self.clock.now(),
                error_kind=ErrorKind.RESET,
                error_message="reset",
                **label,
            )
        return RequestRecord(
            rid,
            sent,
            tuple(times),
            self.clock.now(),
            prompt_tokens=16,
            output_tokens=out,
            finish_reason="length",
            **label,
        )


def random_words(prompt_tokens: int = 8, output_tokens: int = 20):
    """A workload factory for ``LoadEngine(workload_factory=…)``: no tokenizer calls."""
    from infmon.load.workload.words import RandomWords

    async def make(config):
        return RandomWords(prompt_tokens, (output_tokens, output_tokens), seed=config.seed)

    return make


def scripted(**kw):
    """A client factory for ``LoadEngine(client_factory=…)``."""
    return lambda config, clock: ScriptedClient(config, clock, **kw)
