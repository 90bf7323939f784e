"""The official openai client and infmon, on the same scripted server: infmon's TTFT and
output tok/s sit between the server's scripted truth and the reference client's figures.

The server (``tests.loadkit.server``) sleeps ``TTFT_S`` before the first chunk and ``ITL_S``
between chunks, so every request's true TTFT is at least ``TTFT_S`` and no client can exceed
``IDEAL_TOK_S`` (each worker's requests run back to back). The openai client stamps its TTFT
around its own request building and chunk parsing (httpx, pydantic), infmon at the socket
write and read, so infmon's TTFT is the lower of the two and its tok/s the higher: the bounds
below are one-sided where the reference's own cost makes them so, and two-sided only against
the scripted truth. Measured on this 2-core VM, 20 runs of this test with a busy loop on each
core (two ``python3 -c 'while True: pass'``, other sessions running, load average 2-6.5):
20 of 20 passed; per round infmon's TTFT p50 151.0-159.6 ms (bound: at least 150), tok/s
272-401 (bound: at most the 419.7 ceiling + 1%); per run the median ratio infmon/openai of
TTFT 0.92-0.97 (bound: at most 1.02) and of tok/s 1.02-1.07 (bound: at least 0.95).
The old test compared the two at ±5% and failed under load because the reference's own
overhead (5–20 ms per request here) is larger than that.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import openai
import pytest

from infmon.clock import MonotonicClock
from infmon.load.client import StreamingClient
from infmon.load.params import ClientParams
from infmon.load.workload.words import RandomWords as Workload
from infmon.model.records.figures import summarize
from tests.loadkit.server import serve_subprocess

pytestmark = pytest.mark.e2e
CONCURRENCY, PER_WORKER, OUT_TOKENS = 4, 6, 32
TTFT_S, ITL_S = 0.15, 0.005
IDEAL_TOK_S = CONCURRENCY * OUT_TOKENS / (TTFT_S + (OUT_TOKENS - 1) * ITL_S)
"""The scripted server's ceiling: every request lasts at least TTFT + 31 gaps."""
ROUNDS = 4
"""Rounds of the two clients run side by side; the median of the per-round ratios counts."""


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
    assert s.output_tokens == CONCURRENCY * PER_WORKER * OUT_TOKENS  # counted from usage
    assert min(r.ttft_s for r in recs) >= TTFT_S  # never before the server's first chunk
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


def _at(run, url: str, go_s: float) -> tuple[float, float]:
    """In a process of its own: wait for the shared start time, then run one client."""
    time.sleep(max(0.0, go_s - time.perf_counter()))  # CLOCK_MONOTONIC: one clock per boot
    return asyncio.run(run(url))


def measure(url: str) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    """``ROUNDS`` rounds of (infmon's, openai's) (median TTFT, tok/s), the two clients run at
    the same time in two processes: both see the same server and the same CPU contention."""
    rounds = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pool.submit(time.sleep, 0).result()  # both workers up before the first round
        pool.submit(time.sleep, 0).result()
        for _ in range(ROUNDS):
            go = time.perf_counter() + 0.5
            ours = pool.submit(_at, infmon_run, url, go)
            ref = pool.submit(_at, openai_run, url, go)
            rounds.append((ours.result(timeout=120), ref.result(timeout=120)))
    return rounds


def test_openai_client_and_infmon_agree() -> None:
    with serve_subprocess("--ttft", str(TTFT_S), "--itl", str(ITL_S)) as url:
        rounds = measure(url)
    for (ttft, tok_s), (ref_ttft, ref_tok_s) in rounds:
        print(
            f"\nmedian TTFT ms: infmon {ttft * 1e3:.2f} openai {ref_ttft * 1e3:.2f} "
            f"(scripted {TTFT_S * 1e3:.0f}); output tok/s: infmon {tok_s:.1f} "
            f"openai {ref_tok_s:.1f} (ceiling {IDEAL_TOK_S:.1f})",
            end="",
        )
    ttft_ratio = statistics.median(o[0] / r[0] for o, r in rounds)
    tok_ratio = statistics.median(o[1] / r[1] for o, r in rounds)
    assert all(o[0] >= TTFT_S for o, _ in rounds)  # never before the server's first chunk
    assert ttft_ratio <= 1.02  # and never later than the reference client stamps it
    assert all(o[1] <= IDEAL_TOK_S * 1.01 for o, _ in rounds)  # no more than the server sent
    assert tok_ratio >= 0.95  # and at least the reference's rate, in the same rounds
