"""Fidelity of the simulated engine against its own analytic model, in virtual time (no HTTP)."""

from __future__ import annotations

import pytest

from infmon.sim.analysis import closed_loop
from infmon.sim.engine import Engine, Sequence
from infmon.sim.kvcache import BlockPool, block_hashes
from infmon.sim.memory import memory_budget
from infmon.sim.roofline import predicted_decode_tok_s
from infmon.sim.scenarios import SCENARIOS, build_config
from infmon.sim.spec import marginal_acceptance


def cfg_of(name: str, **kw):
    return build_config(SCENARIOS[name], **kw)


def test_baseline_memory_and_roofline_match_published_figures():
    cfg = cfg_of("baseline")
    mem = memory_budget(cfg)
    assert cfg.model.params == pytest.approx(7.615e9, rel=0.002)  # Qwen2.5-7B's published count
    assert mem.weights_gib == pytest.approx(14.18, abs=0.02)  # x 2 bytes, in GiB
    assert mem.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2
    # a decode step reads the decoder layers and the lm_head (not the embedding table)
    read = cfg.model.linear_params * 2 + cfg.model.lm_head_bytes
    assert read == pytest.approx(14.14e9, rel=0.002)
    assert predicted_decode_tok_s(cfg) == pytest.approx(58, rel=0.03)


@pytest.mark.parametrize("name", ["baseline", "fp8", "contention"])
def test_single_stream_equals_roofline_within_5pct(name):
    cfg = cfg_of(name)
    r = closed_loop(cfg, 1, prompt_tokens=128, output_tokens=512, duration_s=40, warmup_s=2)
    predicted = predicted_decode_tok_s(cfg, 1, context_tokens=128 + 256)
    assert r.output_tok_s == pytest.approx(predicted, rel=0.05)


def test_scenarios_move_single_stream_the_right_way_by_the_right_amount():
    base = predicted_decode_tok_s(cfg_of("baseline"))
    assert base == pytest.approx(58, rel=0.05)
    assert predicted_decode_tok_s(cfg_of("spec-pitfall")) == pytest.approx(16, rel=0.15)
    assert predicted_decode_tok_s(cfg_of("spec-good")) > 1.5 * base
    assert predicted_decode_tok_s(cfg_of("fp8")) > 1.6 * base  # lm_head and host work stay
    assert predicted_decode_tok_s(cfg_of("contention")) < 0.7 * base
    # The drafters cost KV: fewer blocks than baseline, most for the large drafter.
    blocks = {n: memory_budget(cfg_of(n)).num_gpu_blocks for n in SCENARIOS}
    assert blocks["spec-pitfall"] < blocks["spec-good"] < blocks["baseline"] < blocks["fp8"]


def test_throughput_curve_rises_nearly_linearly_then_flattens():
    cfg = cfg_of("baseline")
    curve = {
        c: closed_loop(cfg, c, 256, 256, duration_s=30, warmup_s=8)
        for c in (1, 2, 4, 8, 16, 64, 256, 512)
    }
    one = curve[1].output_tok_s
    for c in (2, 4, 8, 16):  # memory-bound decode: nearly flat step time
        assert curve[c].output_tok_s >= 0.85 * c * one
        assert curve[c].output_tok_s == pytest.approx(
            predicted_decode_tok_s(cfg, c, 256 + 128), rel=0.10
        )
    assert curve[256].output_tok_s < 0.75 * 256 * one  # bending: KV reads and prefill interfere
    assert curve[512].output_tok_s == pytest.approx(curve[256].output_tok_s, rel=0.05)  # flat
    assert curve[512].max_waiting > 200  # past max_num_seqs the rest queue
    for c, r in curve.items():
        assert r.waiting_violations == 0, c
        if c <= 64:
            assert r.max_waiting == 0, c  # no queue below the cap


def test_tiny_kv_preempts_and_caps_running():
    cfg = cfg_of("tiny-kv")
    r = closed_loop(cfg, 64, 256, 256, duration_s=30, warmup_s=5)
    assert r.preemptions > 10
    assert r.mean_running < 40  # KV, not max_num_seqs (256), is the limit
    assert r.waiting_violations == 0
    # The same load on baseline KV never preempts.
    assert closed_loop(cfg_of("baseline"), 64, 256, 256, 15, 2).preemptions == 0


@pytest.mark.parametrize("name", ["spec-good", "spec-pitfall"])
def test_acceptance_counters_match_configuration_within_5pct(name):
    cfg = cfg_of(name)
    r = closed_loop(cfg, 64, 64, 256, duration_s=90, warmup_s=10)
    k = cfg.speculative_k
    marg = marginal_acceptance(cfg.acceptance, k, cfg.acceptance_concentration)
    assert r.draft_tokens == k * r.drafts
    assert r.accepted_tokens / r.draft_tokens == pytest.approx(sum(marg) / k, rel=0.05)
    for i in range(k):
        if marg[i] >= 0.05:  # enough samples for a 5% check
            assert r.accepted_per_pos[i] / r.drafts == pytest.approx(marg[i], rel=0.05)


def test_chunked_prefill_respects_token_budget():
    cfg = cfg_of("baseline", max_num_batched_tokens=512)
    engine = Engine(cfg)
    engine.add(Sequence("long", 2000, 4, None, 0.0), list(range(2000)))
    steps, t = [], 0.0
    while engine.has_work:
        out = engine.step(t)
        t = out.end_s
        steps.append(out)
    assert all(s.scheduled_tokens <= 512 for s in steps)
    first_token_step = next(i for i, s in enumerate(steps) if s.emitted)
    assert first_token_step == 3  # ceil(2000 / 512) = 4 chunks, first token after the 4th
    assert sum(s.generation_tokens for s in steps) == 4


def test_prefix_cache_hits_full_blocks_of_a_shared_prefix():
    cfg = cfg_of("baseline")
    r = closed_loop(cfg, 4, 512, 16, duration_s=5, shared_prefix=320)
    engine = Engine(cfg)
    ids = list(range(320)) + [7] * 100
    engine.add(Sequence("a", 420, 2, None, 0.0), ids)
    t = 0.0
    while engine.has_work:
        t = engine.step(t).end_s
    engine.add(Sequence("b", 420, 2, None, t), ids[:320] + [9] * 100)
    out = engine.step(t)
    assert out.prefix_queries == 420
    assert out.prefix_hits == 320  # 20 full blocks of 16
    assert r.finished > 0


def test_block_pool_evicts_cached_blocks_only_when_needed():
    pool = BlockPool(4)
    a = pool.allocate(2)
    pool.register(a[0], 111)
    pool.release(a)
    assert pool.num_free == 4 and pool.cached == {111: a[0]}
    assert pool.lookup([111], 1) == [a[0]]
    pool.release([a[0]])
    assert pool.allocate(4) is not None  # evicts the cached block
    assert pool.cached == {}
    assert block_hashes(list(range(40)), 16) != block_hashes(list(range(1, 41)), 16)
    assert len(block_hashes(list(range(40)), 16)) == 2


def test_a_request_that_arrives_mid_step_is_queued_when_the_next_step_takes_it_in():
    """vLLM stamps QUEUED when its busy loop reads the input queue, between steps: a request
    that reached the scheduler mid-step has its queue start at the next step, so its queue time
    (scheduled - queued) is ~0 when it is scheduled at once, as the real one here showed."""
    from infmon.sim.engine import queued_at
    from infmon.sim.metrics import MetricsLevel, per_request_metrics

    engine = Engine(cfg_of("baseline"))
    engine.add(Sequence("a", 128, 8, None, 0.0), list(range(128)))
    first = engine.step(0.0)
    late = Sequence("b", 128, 8, None, first.start_s)
    late.queued_s = (first.start_s + first.end_s) / 2  # reached the scheduler mid-step
    engine.add(late, list(range(128)))
    engine.step(first.end_s)
    assert queued_at(late) == first.end_s and late.scheduled_s == first.end_s
    timing = per_request_metrics(late, MetricsLevel(True, "none", 0))
    assert timing["queue_time_ms"] == 0.0


def test_a_slow_turn_stretches_every_step_by_the_pace():
    """The ``wander`` fault's slow turn (``Engine.pace``): each step takes that many times as
    long, decode and prefill alike, and the per-request times the server reports follow."""
    steps = []
    for pace in (1.0, 2.0):
        engine = Engine(cfg_of("baseline"))
        engine.pace = pace
        engine.add(Sequence("a", 128, 8, None, 0.0), list(range(128)))
        t, spans = 0.0, []
        while engine.has_work:
            out = engine.step(t)
            spans.append(out.end_s - out.start_s)
            t = out.end_s
        steps.append(spans)
    full, slow = steps
    assert len(full) == len(slow) > 2
    assert all(s == pytest.approx(2 * f) for f, s in zip(full, slow, strict=True))
