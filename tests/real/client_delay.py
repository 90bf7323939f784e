"""How much each client adds to the TTFT it reports: vLLM's benchmark client and infmon's.

Both clients read ``perf_counter`` but not at the same places: ``vllm bench serve`` stamps its
start before aiohttp builds the request and its first token after aiohttp's reader, its own SSE
buffer and ``json.loads``; infmon stamps when the request is handed to its connection and when
the socket read returns. On a fast machine the difference is tens of microseconds; on this
2-core VM it is about a millisecond, which is 10% of the tiny model's ~10 ms TTFT.

This measures it instead of guessing: ``infmon sim --trace-timing`` records when it parsed each
request and wrote each chunk (the clock the clients read), so for every request
``client TTFT − server TTFT`` is exactly what that client added (its send path, the loopback,
its read path). The reference side runs vLLM's own request function
(``vllm.benchmarks.lib.endpoint_request_func.async_request_openai_completions``, the one
``vllm bench serve`` calls, from the cached environment) in the same closed loop as
``vllm bench serve --max-concurrency``; the infmon side is ``infmon bench``. Same prompts, same
lengths, same CPU pinning as the agreement test.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from infmon.journal.reader import SessionReader
from infmon.sim.launch import start_simulator, stop_process
from infmon.sim.trace import read_trace, settled
from tests.real.harness import REPO, get_text, rs

# A simulated server paced like the tiny model on CPU (0.5B on an L40S: TTFT ~7 ms, TPOT ~2.5 ms
# at 4 streams; vLLM here: ~10 ms, 2-3.5 ms), so each client's event loop is as busy as there.
# (On an H100 profile, chunks 4x as often, the extra measured 0.50-1.04 ms; on this one 0.84-1.0.)
SIM_ARGS = ("--gpu", "L40S", "--model", "Qwen/Qwen2.5-0.5B-Instruct")

VLLM_CLIENT = r"""
import asyncio, json, sys
import aiohttp
from vllm.benchmarks.lib.endpoint_request_func import (RequestFuncInput,
                                                       async_request_openai_completions)

url, model, prompts_file, out, concurrency, output_len = sys.argv[1:7]
prompts = [json.loads(line)["prompt"] for line in open(prompts_file)]


async def main():
    # As vllm bench serve: one session with its connector settings, a semaphore for the
    # concurrency, one initial request first.
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, use_dns_cache=True,
                                     keepalive_timeout=60, enable_cleanup_closed=True,
                                     force_close=False)
    timeout = aiohttp.ClientTimeout(total=6 * 60 * 60)
    sem = asyncio.Semaphore(int(concurrency))
    results = []
    async with aiohttp.ClientSession(connector=connector, trust_env=True, timeout=timeout) as s:
        async def one(i, prompt, keep=True):
            async with sem:
                inp = RequestFuncInput(prompt=prompt, api_url=url + "/v1/completions",
                                       prompt_len=0, output_len=int(output_len), model=model,
                                       ignore_eos=True, request_id=f"vllm-client-{i}")
                o = await async_request_openai_completions(inp, s)
                if keep:
                    results.append([f"vllm-client-{i}", o.ttft if o.success else None])
        await one(-1, prompts[0], keep=False)
        await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    json.dump(results, open(out, "w"))


asyncio.run(main())
"""


@dataclass(frozen=True)
class ClientDelay:
    """Median milliseconds each client added to TTFT (client TTFT − the server's own)."""

    vllm_ms: float
    infmon_ms: float
    n_vllm: int
    n_infmon: int

    @property
    def extra_ms(self) -> float:
        """How much more vLLM's benchmark client adds to TTFT than infmon does."""
        return self.vllm_ms - self.infmon_ms


def _server_ttfts(trace: Path) -> dict[str, float]:
    """The server's own TTFT (parsed → first chunk written) by the client's request id."""
    return {
        rid: chunks[0] - received
        for rid, (received, chunks) in read_trace(settled(trace)).items()
        if chunks
    }


def _vllm_side(
    url: str,
    model: str,
    prompts: Path,
    tmp: Path,
    trace: Path,
    concurrency: int,
    output_len: int,
    cpus: set[int] | None,
) -> list[float]:
    script, out = tmp / "vllm_client.py", tmp / "vllm_client.json"
    script.write_text(VLLM_CLIENT)
    cmd = [
        str(rs.env_python()),
        str(script),
        url,
        model,
        str(prompts),
        str(out),
        str(concurrency),
        str(output_len),
    ]
    proc = subprocess.run(
        cmd,
        env=rs.server_env(),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=rs.pin_self(cpus),
    )
    assert proc.returncode == 0, f"vLLM's request function failed:\n{proc.stderr[-3000:]}"
    server = _server_ttfts(trace)
    return [
        ttft - server[rid]
        for rid, ttft in json.loads(out.read_text())
        if ttft is not None and rid in server
    ]


def _infmon_side(
    url: str,
    prompts: Path,
    tmp: Path,
    trace: Path,
    concurrency: int,
    output_len: int,
    cpus: set[int] | None,
) -> list[float]:
    session = tmp / "infmon-session"
    cmd = [
        sys.executable,
        "-m",
        "infmon",
        "bench",
        url,
        "--dataset",
        str(prompts),
        "--output-tokens",
        str(output_len),
        "--endpoint",
        "completions",
        "--concurrency",
        str(concurrency),
        "--step-requests",
        str(sum(1 for _ in prompts.open())),
        "--step-duration",
        "300s",
        "--warmup",
        "0s",
        "--session-dir",
        str(session),
    ]
    proc = subprocess.run(
        cmd,
        env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=rs.pin_self(cpus),
    )
    assert proc.returncode == 0, (
        f"infmon bench failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    # infmon's X-Request-Id is "infmon-<random hex>-<request id>"; the journal keeps the id.
    by_id = {
        int(rid.rsplit("-", 1)[1]): ttft
        for rid, ttft in _server_ttfts(trace).items()
        if rid.startswith("infmon-") and rid.rsplit("-", 1)[1].isdigit()
    }
    return [
        r.ttft_s - by_id[r.request_id]
        for r in SessionReader(session).iter_records()
        if r.chunk_times_s and r.request_id in by_id and not r.warmup
    ]


def measure(
    prompts: Path,
    tmp: Path,
    *,
    concurrency: int = 4,
    output_len: int = 32,
    server_cpus: set[int] | None = None,
    client_cpus: set[int] | None = None,
) -> ClientDelay:
    """Run both clients against ``infmon sim --trace-timing`` (pinned like the real server)."""
    tmp.mkdir(parents=True, exist_ok=True)
    trace = tmp / "sim-trace.jsonl"
    sim_args = (*SIM_ARGS, "--port", "0", "--trace-timing", str(trace))
    # The simulator runs on the server's CPU, as vLLM does in the agreement test.
    sim, url = start_simulator(sim_args, preexec_fn=rs.pin_self(server_cpus))
    try:
        model = json.loads(get_text(url + "/v1/models"))["data"][0]["id"]
        ref = _vllm_side(url, model, prompts, tmp, trace, concurrency, output_len, client_cpus)
        ours = _infmon_side(url, prompts, tmp, trace, concurrency, output_len, client_cpus)
    finally:
        stop_process(sim)
    n = sum(1 for _ in prompts.open())
    assert len(ref) >= 0.9 * n and len(ours) >= 0.9 * n, f"joined {len(ref)} and {len(ours)} of {n}"
    return ClientDelay(
        1e3 * statistics.median(ref), 1e3 * statistics.median(ours), len(ref), len(ours)
    )
