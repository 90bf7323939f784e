"""A deterministic synthetic session (closed-loop steps with a knee), for tests and benchmarks
(not shipped in the wheel: tests and `bench/` import it from here).

It writes through the real ``JournalWriter``, so reading it back exercises the same path
as a recorded run. The server model is deliberately simple: decode time per token grows
once concurrency passes ``knee_c``, queueing appears past ``max_num_seqs``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infmon.clock import FakeClock
from infmon.journal.writer import JournalWriter
from infmon.model.records.request import RequestRecord
from infmon.model.steps.book import StepBook
from infmon.model.steps.span import CLOSED, JOURNAL_KIND, Level


@dataclass(frozen=True)
class SyntheticServer:
    ttft_s: float = 0.05
    tpot_s: float = 0.02
    knee_c: int = 16
    max_num_seqs: int = 32
    kv_capacity_tokens: int = 65536
    block_size: int = 16
    spec_acceptance: float | None = None
    jitter: float = 0.1


def _request(
    rng: random.Random,
    srv: SyntheticServer,
    c: int,
    rid: int,
    sent: float,
    out_tokens: int,
    step: int,
    warmup: bool,
) -> RequestRecord:
    slow = max(1.0, c / srv.knee_c)
    queue = max(0.0, (c - srv.max_num_seqs) / srv.max_num_seqs) * out_tokens * srv.tpot_s
    t = sent + queue + srv.ttft_s * (1 + c / (4 * srv.knee_c)) * (1 + srv.jitter * rng.random())
    times = [t]
    for _ in range(out_tokens - 1):
        t += srv.tpot_s * slow * (1 + srv.jitter * (rng.random() - 0.5))
        times.append(t)
    return RequestRecord(
        request_id=rid,
        sent_s=sent,
        chunk_times_s=tuple(times),
        end_s=t + 0.0005,
        chunk_tokens=(1,) * out_tokens,
        prompt_tokens=128,
        output_tokens=out_tokens,
        finish_reason="length",
        http_status=200,
        step=step,
        concurrency=c,
        warmup=warmup,
    )


def _scrape(j: JournalWriter, srv: SyntheticServer, t: float, c: int, gen_tok_s: float) -> None:
    running = min(c, srv.max_num_seqs)
    spec = None
    if srv.spec_acceptance is not None:
        a = srv.spec_acceptance
        spec = {
            "acceptance_rate": a,
            "mean_acceptance_length": 1 + 3 * a,
            "acceptance_per_position": [a, a * a, a**3],
        }
    j.write_scrape(
        {
            "timestamp_s": t,
            "backend": "vllm-v1",
            "models": ["synthetic/model"],
            "state": "ok",
            "running": running,
            "waiting": max(0, c - srv.max_num_seqs),
            "kv_cache_usage": min(1.0, running * 192 / srv.kv_capacity_tokens),
            "generation_tokens_per_s": gen_tok_s,
            "preemptions_per_s": 0.0,
            "max_model_len": 4096,
            "kv_capacity_tokens": srv.kv_capacity_tokens,
            "kv_block_size_tokens": srv.block_size,
            "kv_num_gpu_blocks": srv.kv_capacity_tokens // srv.block_size,
            "cache_config": {"cache_dtype": "auto", "block_size": str(srv.block_size)},
            "spec_decode": spec,
        }
    )


def write_synthetic_session(
    session_dir: Path,
    concurrencies: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    step_duration_s: float = 10.0,
    out_tokens: int = 32,
    warmup_s: float = 1.0,
    seed: int = 1,
    server: SyntheticServer | None = None,
    slo: str | None = "ttft=500ms,tpot=50ms",
    finish: bool = True,
    max_requests: int | None = None,
    loop_lag_ms_per_stream: float | None = None,
    label: str = "synthetic",
) -> int:
    """Write a session of closed-loop steps; returns the number of request records.
    ``loop_lag_ms_per_stream``: the client's event-loop lag p99 recorded per step, growing with
    concurrency (None: not measured)."""
    srv, rng, clock = server or SyntheticServer(), random.Random(seed), FakeClock(100.0)
    j = JournalWriter(session_dir, clock=clock, autoflush=False)
    j.write_config(
        {
            "url": "http://127.0.0.1:8000",
            "model": "synthetic/model",
            "endpoint": "completions",
            "label": label,
            "slo": slo,
            "api_key": "sk-never-written",
        }
    )
    rid = 0
    book = StepBook()
    for c in concurrencies:
        start = clock.now()
        for ev in book.begin(Level(CLOSED, c), start, "bench", warmup_s):
            j.write_event(JOURNAL_KIND[ev.kind], **ev.payload())
        step = book.next_index - 1
        free = [start + i * 0.001 for i in range(c)]
        next_scrape, tokens_since = start, 0
        while min(free) < start + step_duration_s:
            slot = min(range(c), key=free.__getitem__)
            sent = free[slot]
            r = _request(rng, srv, c, rid, sent, out_tokens, step, sent < start + warmup_s)
            j.write_record(r)
            rid += 1
            tokens_since += out_tokens
            free[slot] = r.end_s + 0.0002
            while next_scrape <= sent:
                _scrape(j, srv, next_scrape, c, tokens_since)
                next_scrape, tokens_since = next_scrape + 1.0, 0
            if max_requests is not None and rid >= max_requests:
                break
        end = max(free)
        clock.t = end
        lag = (
            {"stats": {"loop_lag_p99_ms": c * loop_lag_ms_per_stream}}
            if loop_lag_ms_per_stream
            else {}
        )
        for ev in book.end(end):
            j.write_event(JOURNAL_KIND[ev.kind], **ev.payload(), **lag)
        if max_requests is not None and rid >= max_requests:
            break
    if finish:
        j.close()
    else:
        j.flush()
        j.abandon()
    return rid
