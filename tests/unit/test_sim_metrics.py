"""The simulator's /metrics page against a real vLLM 0.32 page: names, types, HELP, labels, buckets."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from infmon.sim.engine import Engine, Sequence
from infmon.sim.memory import memory_budget
from infmon.sim.metric_schema import buckets_1_2_5
from infmon.sim.metrics import SimMetrics
from infmon.sim.scenarios import SCENARIOS, build_config

REAL = "metrics/vllm-v1-0.32-cpu-tiny-gpt2.prom"


def real_page(fixtures_dir: Path) -> str:
    return (fixtures_dir / REAL).read_text()


def families(text: str) -> dict:
    """vLLM's own families and the HTTP instrumentator's (process/python ones are the host's)."""
    return {
        f.name: f
        for f in text_string_to_metric_families(text)
        if f.name.startswith(("vllm:", "http_"))
    }


def shape(family) -> set:
    """Sample names with their label names and every label value except the model name."""
    return {
        (s.name, tuple(sorted((k, "" if k == "model_name" else v) for k, v in s.labels.items())))
        for s in family.samples
    }


def sim_page(scenario: str = "baseline", schema: str = "v1", traffic: bool = False, **kw) -> str:
    cfg = build_config(SCENARIOS[scenario], served_model_name="tiny-gpt2", **kw)
    metrics = SimMetrics(cfg, memory_budget(cfg), schema)
    if traffic:  # what the captured page had served: one completion, one chat completion
        metrics.observe_http("/v1/completions", "POST", 200, 125, 0, 0.04)
        metrics.observe_http("/v1/chat/completions", "POST", 200, 137, 0, 0.1)
        metrics.observe_http("/metrics", "GET", 200, 0, 9000, 0.01)  # excluded, as in vLLM
    return metrics.render().decode()


def test_v1_page_matches_real_vllm_family_by_family(fixtures_dir):
    real = families(real_page(fixtures_dir))
    ours = families(sim_page(max_model_len=1024, traffic=True))
    missing = sorted(set(real) - set(ours))
    assert not missing, f"families real vLLM serves that the simulator lacks: {missing}"
    assert set(ours) == set(real)
    for name, fam in real.items():
        assert ours[name].type == fam.type, name
        assert ours[name].documentation == fam.documentation, name
        if name == "vllm:cache_config_info":
            assert set(ours[name].samples[0].labels) == set(fam.samples[0].labels)
            continue
        assert shape(ours[name]) == shape(fam), name


def test_length_buckets_follow_max_model_len():
    assert buckets_1_2_5(1024)[-3:] == (200, 500, 1000)
    assert buckets_1_2_5(32768)[-1] == 20000
    page = sim_page()
    assert 'vllm:request_prompt_tokens_bucket{engine="0",le="20000.0"' in page
    assert 'le="50000.0"' not in page


def test_spec_decode_counters_only_with_a_drafter():
    assert "spec_decode" not in sim_page("baseline")
    page = families(sim_page("spec-good"))
    per_pos = page["vllm:spec_decode_num_accepted_tokens_per_pos"]
    assert {s.labels["position"] for s in per_pos.samples if s.name.endswith("_total")} == {
        "0",
        "1",
        "2",
        "3",
    }
    for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        assert page[f"vllm:spec_decode_{n}"].type == "counter"


def test_v0_schema_serves_the_older_names():
    page = families(sim_page("spec-good", "v0"))
    for name in (
        "vllm:gpu_cache_usage_perc",
        "vllm:time_per_output_token_seconds",
        "vllm:num_requests_swapped",
        "vllm:spec_decode_draft_acceptance_rate",
    ):
        assert name in page
    assert "vllm:kv_cache_usage_perc" not in page
    assert all(
        set(s.labels) <= {"model_name", "finished_reason", "le"}
        for f in page.values()
        if f.name != "vllm:cache_config_info"
        for s in f.samples
    )


def test_counters_follow_delivered_steps():
    cfg = build_config(SCENARIOS["baseline"])
    metrics = SimMetrics(cfg, memory_budget(cfg))
    engine = Engine(cfg)
    for i in range(3):
        engine.add(Sequence(str(i), 100, 10 + i, None, 0.0), list(range(i, 100 + i)))
    t, finished = 0.0, []
    while engine.has_work:
        out = engine.step(t)
        t = out.end_s
        metrics.on_step(out)
        for seq in out.finished:
            metrics.on_finished(seq)
            finished.append(seq)
    fams = families(metrics.render().decode())
    value = {
        s.name: s.value
        for f in fams.values()
        for s in f.samples
        if not s.labels.get("le") and s.labels.get("finished_reason", "length") == "length"
    }
    assert value["vllm:generation_tokens_total"] == sum(s.output_len for s in finished) == 33
    assert value["vllm:prompt_tokens_total"] == 300
    assert value["vllm:request_success_total"] == 3


def test_kv_block_and_corrupted_families_only_when_vllm_serves_them(monkeypatch):
    assert "kv_block" not in sim_page() and "corrupted_requests" not in sim_page()
    monkeypatch.setattr("infmon.sim.kvcache.KV_METRICS_SAMPLE", 1.0)
    cfg = build_config(SCENARIOS["tiny-kv"], kv_cache_metrics=True, compute_nans_in_logits=True)
    metrics = SimMetrics(cfg, memory_budget(cfg))
    engine = Engine(cfg)
    for i in range(40):  # distinct prompts through a small cache: blocks are evicted and reused
        engine.add(Sequence(str(i), 2000, 8, None, 0.0), [i * 10_000 + j for j in range(2000)])
    t = 0.0
    while engine.has_work:
        out = engine.step(t)
        t = out.end_s
        metrics.on_step(out, engine.pool.drain_events())
    fams = families(metrics.render().decode())
    counts = {
        n: next(s.value for s in fams[n].samples if s.name.endswith("_count"))
        for n in ("vllm:kv_block_lifetime_seconds", "vllm:kv_block_idle_before_evict_seconds")
    }
    assert all(v > 0 for v in counts.values()), counts
    assert fams["vllm:corrupted_requests"].type == "counter"  # served; the sim never yields NaNs


def test_iteration_tokens_count_generated_not_drafted_tokens_and_mfu_includes_the_drafter():
    cfg = build_config(SCENARIOS["spec-pitfall"])
    metrics = SimMetrics(cfg, memory_budget(cfg))
    engine = Engine(cfg)
    engine.add(Sequence("a", 100, 40, None, 0.0), list(range(100)))
    t, steps, target_only = 0.0, [], 0.0
    while engine.has_work:
        out = engine.step(t)
        t = out.end_s
        steps.append(out)
        metrics.on_step(out)
    page = metrics.render().decode()
    fams = families(page)
    it = fams["vllm:iteration_tokens_total"]
    total = next(s.value for s in it.samples if s.name.endswith("_sum"))
    assert total == 100 + 40  # prompt tokens once + generated tokens (drafts not counted)
    assert sum(s.scheduled_tokens for s in steps) > total  # drafts were scheduled
    flops = next(s.value for s in fams["vllm:estimated_flops_per_gpu"].samples)
    target_only = 2 * cfg.model.linear_params * sum(s.scheduled_tokens for s in steps)
    assert flops > 1.5 * target_only  # the 7B drafter's passes are in the MFU counters
    written = next(s.value for s in fams["vllm:estimated_write_bytes_per_gpu"].samples)
    assert written > 0
