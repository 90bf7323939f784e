"""A minimal reference streaming client written directly on aiohttp (what ``vllm bench serve`` uses).

Closed loop: ``concurrency`` tasks, each sending streamed completions one after another. For every
request it keeps the send time and the ``perf_counter`` of every content chunk, read line by line
from aiohttp's stream reader, the way vLLM's benchmark client does. No retries, no journal, no
statistics: the cheapest honest client, to compare infmon's driver against.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field

import aiohttp

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "his",
    "they",
    "at",
    "be",
    "this",
    "from",
    "have",
    "or",
    "by",
    "one",
    "had",
    "not",
    "but",
    "what",
    "all",
    "were",
    "when",
    "we",
    "there",
    "can",
    "an",
    "your",
    "which",
    "their",
    "said",
    "if",
    "do",
    "will",
    "each",
]


@dataclass
class RefRecord:
    request_id: str
    sent_s: float
    chunk_times_s: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    ok: bool = False


async def _one(session: aiohttp.ClientSession, url: str, body: dict, rid: str) -> RefRecord:
    rec = RefRecord(rid, time.perf_counter())
    times = rec.chunk_times_s
    async with session.post(url, json=body, headers={"X-Request-Id": rid}) as resp:
        if resp.status != 200:
            await resp.read()
            return rec
        async for line in resp.content:
            t = time.perf_counter()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":  # read on to the end of the body: the connection is reused
                rec.ok = True
                continue
            obj = json.loads(data)
            if obj.get("choices"):
                times.append(t)
            usage = obj.get("usage")
            if usage:
                rec.output_tokens = usage.get("completion_tokens")
    return rec


async def run_reference(
    base_url: str,
    model: str,
    concurrency: int,
    stop: asyncio.Event,
    prompt_tokens: int,
    output_tokens: int,
    id_prefix: str,
    records: list[RefRecord],
) -> None:
    """Hold ``concurrency`` streams until ``stop`` is set, then let them finish; keep every record."""
    url = base_url.rstrip("/") + "/v1/completions"
    rng = random.Random(0)
    counter = iter(range(1 << 62))
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            body = {
                "model": model,
                "prompt": " ".join(rng.choices(_WORDS, k=prompt_tokens)),
                "max_tokens": output_tokens,
                "min_tokens": output_tokens,
                "ignore_eos": True,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            try:
                records.append(await _one(session, url, body, f"{id_prefix}{next(counter)}"))
            except aiohttp.ClientError:
                records.append(RefRecord(f"{id_prefix}?", time.perf_counter()))

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(worker(session)) for _ in range(concurrency)]
        await asyncio.gather(*tasks)  # after ``stop``, each finishes its current request
