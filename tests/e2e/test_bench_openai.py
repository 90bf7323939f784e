"""The official openai client and infmon measure the same median TTFT and output tok/s (±5 %)."""

from __future__ import annotations

import asyncio
import statistics
import time

import openai
import pytest

from infmon.clock import MonotonicClock
from infmon.load.client import ClientParams, StreamingClient
from infmon.load.workload.words import RandomWords as Workload
from infmon.model.stats import summarize
from tests.loadkit.server import serve_subprocess

pytestmark = pytest.mark.e2e
CONCURRENCY, PER_WORKER, OUT_TOKENS = 4, 6, 32


async def infmon_run(url: str) -> tuple[float, float]:
    client = StreamingClient(ClientParams(base_url=url, model="fake-model"), MonotonicClock())
    work = Workload(prompt_tokens=16, output_tokens=(OUT_TOKENS, OUT_TOKENS), seed=1)
    await client.detect_capabilities()

    async def worker(w: int) -> list:
        return [
            await client.stream(w * 100 + i, work.next().prompt, OUT_TOKENS)
            for i in range(PER_WORKER)
        ]

    t0 = time.perf_counter()
    recs = [
        r for batch in await asyncio.gather(*(worker(w) for w in range(CONCURRENCY))) for r in batch
    ]
    duration = time.perf_counter() - t0
    await client.aclose()
    s = summarize(recs, duration)
    assert s.completed == CONCURRENCY * PER_WORKER
    return s.ttft.p50, s.output_throughput_tok_s


async def openai_run(url: str) -> tuple[float, float]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="none", max_retries=0)
    work = Workload(prompt_tokens=16, output_tokens=(OUT_TOKENS, OUT_TOKENS), seed=1)
    ttfts: list[float] = []
    tokens = 0

    async def one() -> None:
        nonlocal tokens
        st = time.perf_counter()
        first = None
        stream = await client.completions.create(
            model="fake-model",
            prompt=work.next().prompt.as_text(),
            max_tokens=OUT_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True, "min_tokens": OUT_TOKENS},
        )
        async for chunk in stream:
            if chunk.choices and first is None:
                first = time.perf_counter() - st
            if chunk.usage:
                tokens += chunk.usage.completion_tokens
        ttfts.append(first)

    async def worker() -> None:
        for _ in range(PER_WORKER):
            await one()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    duration = time.perf_counter() - t0
    await client.close()
    return statistics.median(ttfts), tokens / duration


def test_openai_client_and_infmon_agree() -> None:
    with serve_subprocess("--ttft", "0.15", "--itl", "0.005") as url:
        # Alternate the two clients and keep each one's median of runs, against machine noise.
        runs = {"infmon": [], "openai": []}
        for _ in range(3):
            runs["infmon"].append(asyncio.run(infmon_run(url)))
            runs["openai"].append(asyncio.run(openai_run(url)))
    ours = [statistics.median(x) for x in zip(*runs["infmon"], strict=True)]
    ref = [statistics.median(x) for x in zip(*runs["openai"], strict=True)]
    print(
        f"\nmedian TTFT ms: infmon {ours[0] * 1e3:.2f} openai {ref[0] * 1e3:.2f}; "
        f"output tok/s: infmon {ours[1]:.1f} openai {ref[1]:.1f}"
    )
    assert ours[0] == pytest.approx(ref[0], rel=0.05)
    assert ours[1] == pytest.approx(ref[1], rel=0.05)
