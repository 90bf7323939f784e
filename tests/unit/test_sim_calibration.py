"""The simulator against published GPU measurements, and the shapes real vLLM shows (issue 18)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infmon.sim import profiles
from infmon.sim.fidelity import BAND, evaluate, points
from infmon.sim.memory import batch_defaults, memory_budget
from infmon.sim.predict import LoadSpec, predict
from infmon.sim.roofline import predicted_decode_tok_s
from infmon.sim.scenarios import SCENARIOS, Scenario, build_config
from infmon.sim.spec import SpecConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("point", points(), ids=lambda p: p.name)
def test_published_point_inside_the_band(point):
    (r,) = evaluate([point])
    what = "below the bound" if point.bound else f"ratio {r.ratio:.2f} in {BAND}"
    assert r.ok, f"{point.name}: sim {r.predicted:.2f} vs {point.published} ({what})"


def test_context_length_slope_follows_the_published_one():
    """Qwen2.5-7B on A100: 70.3 / 84.28 = 0.834 published from 1 to 30,720 input tokens."""
    rs = {p.name: r.predicted for p, r in zip(points(), evaluate(points()[:4]), strict=False)}
    slope = rs["Qwen2.5-7B-Instruct bs1 in=30720"] / rs["Qwen2.5-7B-Instruct bs1 in=1"]
    assert slope == pytest.approx(70.30 / 84.28, abs=0.05)


def _speedup(sc: Scenario, spec: dict, c: int) -> float:
    load = LoadSpec(max(2 * c, 8), 256, 256, concurrency=c)
    base = predict(build_config(sc), load).output_throughput_tok_s
    return predict(build_config(sc, **spec), load).output_throughput_tok_s / base


@pytest.mark.parametrize(
    "spec",
    [
        {"speculative_k": 4, "spec_method": "ngram", "acceptance": (0.25,)},
        {
            "drafter": "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            "speculative_k": 3,
            "acceptance": (0.12, 0.1, 0.1),
        },
    ],
    ids=["ngram", "mismatched-draft"],
)
def test_spec_speedup_falls_with_load_and_turns_into_a_slowdown(spec):
    sc = Scenario("s", "", engine="vllm-0.7-v0-spec", max_model_len=4096)
    curve = [_speedup(sc, spec, c) for c in (1, 16, 64)]
    print(f"\nspeed-up at c=1, 16, 64: {[round(x, 2) for x in curve]}")
    if "drafter" not in spec:
        assert curve[0] > curve[1] > curve[2]
    assert curve[2] < 1.0


def test_a_good_drafter_helps_at_low_load_and_less_at_high_load():
    """vLLM's blog (2024-10-17): a speed-up at low QPS that shrinks (and reverses) under load."""
    sc = SCENARIOS["spec-good"]
    base = Scenario("b", "", max_model_len=4096)
    spec = {
        "drafter": sc.drafter,
        "spec_method": sc.spec_method,
        "speculative_k": sc.speculative_k,
        "acceptance": sc.acceptance,
    }
    low, high = _speedup(base, spec, 1), _speedup(base, spec, 128)
    assert low > 1.5
    assert high < 0.8 * low


def test_fp8_gains_less_at_high_batch_than_at_batch_one():
    def gain(gpu: str, batch: int) -> float:
        b = build_config(Scenario("b", "", gpu=gpu))
        f = build_config(Scenario("f", "", gpu=gpu, model="Qwen/Qwen2.5-7B-Instruct-FP8"))
        return predicted_decode_tok_s(f, batch, 1024) / predicted_decode_tok_s(b, batch, 1024)

    for gpu in ("H100-80GB", "RTX-6000-Ada"):  # W8A8 on FP8 tensor cores
        assert gain(gpu, 1) > 1.5
        assert gain(gpu, 256) < gain(gpu, 1)
    # W8A16 on an A100 (no FP8 tensor cores): faster at batch 1, slower than bf16 when compute-bound
    assert gain("A100-80GB", 1) > 1.5
    assert gain("A100-80GB", 512) < 1.0


def test_kv_capacity_falls_as_max_model_len_rises_as_vllm_profiles_it():
    """V0 (no chunked prefill up to 32K): the profiling batch is max_model_len tokens."""
    caps = [
        memory_budget(
            build_config(Scenario("m", "", gpu="A100-80GB", engine="vllm-0.6-v0"), max_model_len=n)
        ).kv_tokens
        for n in (4096, 16384, 32768)
    ]
    assert caps[0] > caps[1] > caps[2]
    # V1 (chunked prefill): the budget is max_num_batched_tokens, and a bigger one costs KV.
    v1 = [
        memory_budget(build_config(SCENARIOS["baseline"], max_num_batched_tokens=n)).kv_tokens
        for n in (2048, 16384)
    ]
    assert v1[0] > v1[1]


def test_batching_defaults_per_gpu_as_vllm_get_batch_defaults():
    v1 = profiles.engine("vllm-v1")
    assert batch_defaults(profiles.gpu("A100-80GB"), v1, 32768)[:2] == (256, 2048)
    assert batch_defaults(profiles.gpu("H100-80GB"), v1, 32768)[:2] == (1024, 8192)
    assert batch_defaults(profiles.gpu("L40S"), v1, 32768)[:2] == (256, 2048)
    assert batch_defaults(profiles.gpu("H100-80GB"), v1, 4)[:2] == (1024, 4096)  # <= seqs x len


def test_memory_is_in_gib_with_the_profiling_peak():
    cfg = build_config(SCENARIOS["baseline"])
    mem = memory_budget(cfg)
    assert mem.total_gib == cfg.gpu.memory_gib
    parts = mem.weights_gib + mem.activation_gib + mem.non_torch_gib + mem.cudagraph_gib
    assert mem.requested_gib - parts == pytest.approx(mem.kv_gib, abs=0.01)
    assert mem.kv_bytes == mem.num_gpu_blocks * 16 * 57344


def test_the_seed_story_still_reproduces():
    base = predicted_decode_tok_s(build_config(SCENARIOS["baseline"]), 1, 384)
    pitfall = predicted_decode_tok_s(build_config(SCENARIOS["spec-pitfall"]), 1, 384)
    assert 56 <= base <= 60
    assert pitfall == pytest.approx(16, rel=0.12)


def test_spec_scenarios_pair_compatible_vocabularies_and_a_mismatch_is_refused():
    for name in ("spec-good", "spec-pitfall"):
        cfg = build_config(SCENARIOS[name])
        assert cfg.drafter is not None and cfg.drafter.vocab_size == cfg.model.vocab_size
    with pytest.raises(SpecConfigError, match=r"same vocabulary size.*152064.*151936"):
        build_config(SCENARIOS["baseline"], drafter="Qwen/Qwen2.5-0.5B-Instruct", speculative_k=4)
    # vLLM 0.7 had no such check: the published 4090 pair still builds there
    build_config(
        Scenario("v0", "", engine="vllm-0.7-v0-spec"),
        drafter="Qwen/Qwen2.5-0.5B-Instruct",
        speculative_k=4,
    )


def test_profiles_are_toml_files_a_user_can_write(tmp_path):
    gpu = tmp_path / "card.toml"
    gpu.write_text(
        'name = "my-card"\nmemory_gib = 40\nbandwidth_gb_s = 1500\nbf16_tflops = 200\n'
        "[achieved]\nbandwidth_fraction = 0.8\n"
    )
    model = tmp_path / "model.toml"
    src = (profiles.DATA / "models" / "Qwen2.5-7B-Instruct.toml").read_text()
    model.write_text(
        src.replace("Qwen/Qwen2.5-7B-Instruct", "me/mine")
        + '\n[quantization_config]\nquant_method = "fp8"\n'
    )
    cfg = build_config(SCENARIOS["baseline"], gpu=str(gpu), model=str(model))
    assert cfg.gpu.name == "my-card" and cfg.model.name == "me/mine"
    assert cfg.model.quant_method == "fp8" and cfg.model.gemm_path(cfg.gpu) == "w8a16"
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n')
    with pytest.raises(profiles.ProfileError):
        build_config(SCENARIOS["baseline"], gpu=str(bad))


def test_every_builtin_profile_names_its_source():
    for table in (profiles.GPUS, profiles.MODELS, profiles.ENGINES):
        for prof in table.values():
            assert prof.source, prof.name


def test_predict_a_1000_request_burst_in_under_10s_of_cpu():
    cmd = [sys.executable, "-m", "infmon", "sim", "--predict", "--gpu", "H100-80GB"]
    cmd += ["--rate", "inf", "--requests", "1000", "--prompt-tokens", "512"]
    cmd += ["--output-tokens", "256", "--json"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    stdout = proc.stdout.read()  # then reap it ourselves, to read this child's own CPU time
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    cpu = usage.ru_utime + usage.ru_stime
    print(f"\n1,000-request burst, 7B-class on H100: {cpu:.2f} s CPU (the whole command)")
    doc = json.loads(stdout)
    assert cpu < 10
    assert doc["requests"] == 1000
    for key in ("output_throughput_tok_s", "total_throughput_tok_s", "kv_capacity_tokens"):
        assert doc[key] > 0
    for key in ("ttft_ms", "tpot_ms"):
        assert set(doc[key]) == {"mean", "p50", "p99"}
    assert {"kv_cache_gib", "preemptions"} <= set(doc)
