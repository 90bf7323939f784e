"""Real vLLM 0.32 with per-request metrics (issue 28, must show 1): each record joined to the
server's own view of it, and the per-request acceptance against the /metrics counters.

One server (module scope): the n-gram drafter, ``--enable-per-request-metrics`` and
``--per-request-spec-decode-metrics detailed``. infmon's own streaming client sends 24
repetitive prompts, 4 at a time, half greedy (the tiny random model loops: drafts accepted)
and half sampled (drafts rejected), so the acceptance rate lies strictly between 0 and 1.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from infmon.load.client import StreamingClient
from infmon.load.params import ClientParams
from infmon.model.records.anatomy import PARTS, split_records
from infmon.model.records.request import RequestRecord
from tests.real.harness import get_text, rs, sample_sum

pytestmark = pytest.mark.real_server

PROMPTS = [f"{w} {w} {w} {w} {w} {w} {w} {w}" for w in ("alpha beta", "x = 1;", "def f(): pass")]
COUNTERS = {
    "steps": "vllm:spec_decode_num_drafts_total",
    "drafted": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}


@pytest.fixture(scope="module")
def vllm_perreq(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    with rs.serve_vllm(server_logs, spec=True, per_request=True) as server:
        yield server


def _counters(url: str) -> dict[str, float]:
    page = get_text(url + "/metrics")
    return {k: sample_sum(page, name) for k, name in COUNTERS.items()}


async def _load(url: str, n: int = 24, concurrency: int = 4) -> tuple[list[RequestRecord], dict]:
    client = StreamingClient(ClientParams(base_url=url, model=rs.MODEL_NAME))
    try:
        caps = await client.detect_capabilities()
        assert caps.per_request_metrics, "the probe must see the server's per-request metrics"
        before = _counters(url)  # after the probe: the counters move with our requests only
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> RequestRecord:
            async with sem:
                extra = {"temperature": 0.0 if i % 2 == 0 else 1.0}
                return await client.stream(i, PROMPTS[i % 3], 32, extra_body=extra)

        records = list(await asyncio.gather(*(one(i) for i in range(n))))
        after = _counters(url)
    finally:
        await client.aclose()
    return records, {k: after[k] - before[k] for k in COUNTERS}


def test_each_request_splits_into_the_servers_parts_and_acceptance_equals_the_counters(
    vllm_perreq: rs.Server,
) -> None:
    records, delta = asyncio.run(_load(vllm_perreq.url))
    assert all(r.ok and r.server is not None and r.server.spec is not None for r in records)
    s = split_records(records)
    assert s.e2e.size == len(records) and s.without == 0
    parts = s.front + s.queue + s.prefill + s.decode + s.tail
    residual = np.abs(parts - s.e2e)
    print(f"median |queue+prefill+decode+client-side - E2E| = {np.median(residual):.6f} ms")
    assert float(np.median(residual)) < 1.0
    # causality (and units): the engine saw no more of a request than the client did
    server_span = s.queue + s.prefill + s.decode
    assert (server_span <= s.e2e + 1.0).all(), (server_span - s.e2e).max()
    assert (s.front >= -1.0).all(), s.front.min()
    medians = {k: float(np.median(getattr(s, k))) for k in (*PARTS, "e2e")}
    print("median ms: " + " ".join(f"{k} {v:.2f}" for k, v in medians.items()))
    for r in records:  # vLLM's definition of the mean ITL
        t = r.server
        assert t is not None and r.output_tokens is not None
        assert t.mean_itl_ms == pytest.approx(t.decode_ms / (r.output_tokens - 1), rel=1e-9)
    specs = [r.server.spec for r in records if r.server is not None and r.server.spec]
    accepted = sum(f.num_accepted_draft_tokens for f in specs)
    drafted = sum(f.num_draft_tokens for f in specs)
    steps = sum(f.num_spec_steps for f in specs)
    rate, counter_rate = accepted / drafted, delta["accepted"] / delta["drafted"]
    unweighted = statistics.mean(f.acceptance_rate for f in specs if f.num_draft_tokens)
    print(
        f"acceptance per request {rate:.4f} (unweighted {unweighted:.4f}) counters {counter_rate:.4f}"
    )
    assert 0 < counter_rate < 1
    assert rate == pytest.approx(counter_rate, rel=0.02)
    assert 1 + accepted / steps == pytest.approx(1 + delta["accepted"] / delta["steps"], rel=0.02)
