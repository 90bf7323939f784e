"""The simulator's KV connectors (``--offload``, ``--pd``): the 2026 families follow from what
the engine did, and infmon reads them back as figures that add up."""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from infmon.clock import MonotonicClock
from infmon.load.client import StreamingClient
from infmon.load.params import ClientParams
from infmon.model.server.families import detail_view, pd_role
from infmon.sim.engine import Engine, Sequence
from infmon.sim.kvtransfer import HOST, HostTier, Link
from infmon.sim.metrics import SimMetrics
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sim.server import ServerOptions, SimServer
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import parse_exposition


def _run_engine(offload_gib: float, requests: int = 240, groups: int = 40, seed: int = 0):
    """Prompts of a shared 1024-token prefix (one of ``groups``) + 64 own tokens, arriving
    faster than the 0.6 GiB GPU cache can keep every prefix: prefixes get evicted."""
    cfg = build_config(SCENARIOS["offload"], kv_offloading_gib=offload_gib)
    engine = Engine(cfg)
    metrics = SimMetrics(cfg, engine.budget)
    rng = random.Random(seed)
    prefixes = [[rng.randrange(5000) for _ in range(1024)] for _ in range(groups)]
    t, moves, deferred_seen, seqs = 0.0, [], 0, []
    for i in range(requests):
        ids = prefixes[rng.randrange(groups)] + [rng.randrange(5000) for _ in range(64)]
        seq = Sequence(f"r{i}", len(ids), 16, None, t)
        seqs.append(seq)
        engine.add(seq, ids)
        for _ in range(2):
            out = engine.step(t)
            t = max(out.end_s, t + 1e-3)
            metrics.on_step(out)
            moves += out.moves
            deferred_seen = max(deferred_seen, out.deferred)
    while engine.has_work:
        out = engine.step(t)
        t = max(out.end_s, t + 1e-3)
        metrics.on_step(out)
        moves += out.moves
        deferred_seen = max(deferred_seen, out.deferred)
    assert all(s.finish_reason == "length" for s in seqs)
    snap = snapshot_of_page(parse_exposition(metrics.render().decode()))
    return engine, snap, moves, deferred_seen, seqs


def test_offload_stores_evicted_blocks_and_loads_them_back_on_a_prefix_hit() -> None:
    engine, snap, moves, deferred_seen, seqs = _run_engine(8.0)
    loads = [m for m in moves if m.kind == HOST]
    stores = [m for m in moves if m.kind == "store"]
    assert loads and stores
    d = snap.detail
    off = d.kv_offload
    assert off is not None
    # bytes follow from the blocks moved; time from the link (latency + bytes / bandwidth)
    bb = engine.block_bytes
    assert off.load_bytes_total == sum(m.blocks for m in loads) * bb
    assert off.store_bytes_total == sum(m.blocks for m in stores) * bb
    link = Link(engine.cfg.host_link_gb_s, engine.cfg.host_link_latency_s)
    assert off.load_time_s_total == pytest.approx(sum(link.time_s(m.nbytes) for m in loads))
    # the loaded tokens are the prompts' external share, from the host tier
    by_source = d.prompt_tokens_by_source_total
    external = sum(s.external_tokens for s in seqs)
    assert external > 0 and by_source["external_kv_transfer"] == external
    assert d.prompt_tokens_cached_by_source_total["host"] == external
    assert off.load_bytes_total == external // engine.cfg.block_size * bb
    assert sum(by_source.values()) == snap.prompt_tokens_total == sum(s.prompt_len for s in seqs)
    assert d.prompt_tokens_cached_total == by_source["local_cache_hit"] + external
    # a request waits while its blocks load (vLLM: deferred, not waiting for capacity)
    assert deferred_seen >= 1
    assert engine.pool.host is not None and 0 < len(engine.pool.host) <= engine.pool.host.capacity


def test_without_offload_the_same_load_recomputes_and_publishes_no_offload_family() -> None:
    _, with_off, *_ = _run_engine(8.0)
    _, without, moves, deferred, _ = _run_engine(0.0)
    assert not moves and deferred == 0
    assert without.detail.kv_offload is None and without.detail.pd_transfer is None
    computed = without.detail.prompt_tokens_by_source_total["local_compute"]
    assert computed > with_off.detail.prompt_tokens_by_source_total["local_compute"]
    assert without.detail.prompt_tokens_by_source_total["external_kv_transfer"] == 0


def test_host_tier_is_lru_and_bounded() -> None:
    tier = HostTier(2)
    assert tier.store(1) and tier.store(2)
    assert not tier.store(1)  # already there: nothing moved, now most recent
    assert tier.store(3)  # evicts 2, the least recently used
    assert tier.prefix([1, 3, 2]) == 2 and tier.prefix([2, 1]) == 0


async def _pd(n: int) -> tuple[SimServer, SimServer, list]:
    """``n`` requests of distinct ~500-token prompts (no prefix shared) through a P/D pair."""
    cfg = build_config(SCENARIOS["pd"], seed=5)
    decode = SimServer(cfg, ServerOptions(seed=5))
    prefill = SimServer(replace(cfg, pd_role="prefill"), ServerOptions(seed=5))
    decode.prefill_pod = prefill
    await prefill.start("127.0.0.1", 0)
    port = await decode.start("127.0.0.1", 0)
    client = StreamingClient(ClientParams(base_url=f"http://127.0.0.1:{port}"), MonotonicClock())
    try:
        await client.resolve_model()
        sem = asyncio.Semaphore(4)

        async def one(i: int):
            async with sem:
                rng = random.Random(i)
                words = " ".join(f"w{rng.randrange(10**6)}" for _ in range(120 + 9 * i))
                return await client.stream(i, words, 24)

        recs = await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        await client.aclose()
        await decode.close()
        await prefill.close()
    return decode, prefill, list(recs)


async def test_pd_pair_prefills_on_one_pod_and_pulls_the_kv_on_the_other() -> None:
    decode, prefill, recs = await _pd(12)
    assert all(r.ok and r.output_tokens == 24 for r in recs)
    d = snapshot_of_page(parse_exposition(decode.metrics.render().decode()))
    p = snapshot_of_page(parse_exposition(prefill.metrics.render().decode()))
    # every request reached both pods (the client's capability probe is one more)
    n = sum(d.requests_finished_total.values())
    assert n == sum(p.requests_finished_total.values()) == len(recs) + 1
    prompt_tokens = d.prompt_tokens_total
    assert prompt_tokens == p.prompt_tokens_total >= sum(r.prompt_tokens for r in recs)
    # the prefill pod computed every prompt (or found it in its own cache), one token each
    p_src = p.detail.prompt_tokens_by_source_total
    assert p_src["local_compute"] + p_src["local_cache_hit"] == prompt_tokens
    assert p_src["external_kv_transfer"] == 0
    assert p.generation_tokens_total == n
    # the decode pod pulled all but each prompt's last token, and computed that one
    d_src = d.detail.prompt_tokens_by_source_total
    assert d_src["external_kv_transfer"] == prompt_tokens - n and d_src["local_cache_hit"] == 0
    assert d_src["local_compute"] == n
    assert d.generation_tokens_total == 24 * len(recs) + 1
    pd = d.detail.pd_transfer
    assert pd is not None and pd.transfers == n and pd.failed_total == 0
    bb = decode.engine.block_bytes
    bs = decode.cfg.block_size
    probe = prompt_tokens - sum(r.prompt_tokens for r in recs)
    pulls = [-(-(t - 1) // bs) * bb for t in [r.prompt_tokens for r in recs] + [probe]]
    assert pd.bytes_total == pytest.approx(sum(pulls))  # whole blocks, from the histogram
    link = Link(decode.cfg.pd_link_gb_s, decode.cfg.pd_link_latency_s)
    assert pd.xfer_time_mean_s == pytest.approx(sum(map(link.time_s, pulls)) / n)
    # the prefill pod publishes the NIXL families but pulled nothing
    assert p.detail.pd_transfer is not None and p.detail.pd_transfer.transfers == 0
    view = detail_view(d.detail, d.waiting)
    assert view is not None and view.external_kv_share > 0.9


def test_a_pods_role_comes_from_its_own_nixl_figures() -> None:
    assert pd_role(None, 1000.0) is None  # no NIXL connector: not a P/D pod
    assert pd_role(3.0, 1000.0) == "decode"  # it pulled prompts' KV
    assert pd_role(0.0, 1000.0) == "prefill"  # it computed prompts and pulled nothing
    assert pd_role(0.0, 0.0) is None  # no traffic yet: cannot tell


def test_requests_whose_kv_arrived_never_stall_the_queue() -> None:
    """16 users of 4,096-token prompts (3,584 shared, 64 prefixes) on 0.6 GiB of GPU KV: loaded
    requests hold their blocks, so they start first; a preempted request at the head that
    cannot get blocks does not stop the queue (it did: clients saw 30 s without a token)."""
    cfg = build_config(SCENARIOS["offload"])
    engine = Engine(cfg)
    rng = random.Random(1)
    prefixes = [[rng.randrange(5000) for _ in range(3584)] for _ in range(64)]
    t, sent, done, steps = 0.0, 0, 0, 0
    live: list[Sequence] = []

    def send() -> None:
        nonlocal sent
        ids = prefixes[rng.randrange(64)] + [rng.randrange(5000) for _ in range(512)]
        seq = Sequence(f"r{sent}", len(ids), 8, None, t)
        seq.queued_s = t
        engine.add(seq, ids)
        live.append(seq)
        sent += 1

    for _ in range(16):
        send()
    loads = 0
    while done < 120:
        out = engine.step(t)
        t = max(out.end_s, t + 1e-3)
        loads += sum(1 for m in out.moves if m.kind == HOST)
        steps += 1
        assert steps < 20_000, f"stuck: {done} done, {len(engine.waiting)} waiting"
        for seq in out.finished:
            done += 1
            live.remove(seq)
            if sent < 120:
                send()
        oldest = min((s.queued_s for s in live if s.first_token_s != s.first_token_s), default=t)
        assert t - oldest < 30.0, "a request waited 30 s for its first token"
    assert loads > 0
