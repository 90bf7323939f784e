"""Named scenarios: a GPU, a model, an engine and settings that tell one story each."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from infmon.sim import profiles
from infmon.sim.memory import batch_defaults
from infmon.sim.roofline import EngineConfig
from infmon.sim.spec import check_draft


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str
    gpu: str = "RTX-6000-Ada"
    model: str = "Qwen/Qwen2.5-7B-Instruct"
    engine: str = "vllm-v1"
    drafter: str | None = None
    spec_method: str = ""
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    contention: float = 0.0
    quality_error_rate: float = 0.0
    kv_offloading_gib: float = 0.0
    pd: bool = False


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "baseline",
            "Qwen2.5-7B-Instruct bf16 on a 48 GB Ada card (RTX 6000 Ada, 960 GB/s): ~58 tok/s "
            "single stream",
        ),
        Scenario(
            "fp8",
            "the same model with FP8 weights: half the bytes per token, more KV, slight quality loss",
            model="Qwen/Qwen2.5-7B-Instruct-FP8",
            quality_error_rate=0.04,
        ),
        Scenario(
            "spec-good",
            "an EAGLE-style head drafting k=4 at high acceptance: faster single stream",
            drafter="infmon/EAGLE-Qwen2.5-7B-Instruct",
            spec_method="eagle",
            speculative_k=4,
            acceptance=(0.8, 0.7, 0.6, 0.5),
        ),
        Scenario(
            "spec-pitfall",
            "a drafter as large as the target (R1-Distill-Qwen-7B, same vocab) k=3, low "
            "acceptance: single stream ~57 -> ~16 tok/s, less KV",
            drafter="deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
            spec_method="draft_model",
            speculative_k=3,
            acceptance=(0.12, 0.1, 0.1),
        ),
        Scenario(
            "tiny-kv",
            "gpu_memory_utilization 0.36: ~0.6 GiB of KV, preemptions under modest load",
            gpu_memory_utilization=0.36,
            max_model_len=8192,
        ),
        Scenario(
            "offload",
            "tiny-kv's 0.6 GiB of GPU KV with 8 GiB of CPU offload: evicted prefix blocks go to "
            "host memory and come back over PCIe on a prefix hit instead of being recomputed",
            gpu_memory_utilization=0.36,
            max_model_len=8192,
            kv_offloading_gib=8.0,
        ),
        Scenario(
            "pd",
            "disaggregated prefill/decode: a prefill pod and a decode pod (the API), the "
            "prompt's KV pulled over NIXL at 25 GB/s",
            pd=True,
        ),
        Scenario(
            "contention",
            "a noisy neighbour on the GPU: every step 60% slower, queue and KV unchanged",
            contention=0.6,
        ),
    )
}

_SCENARIO_KEYS = {f.name for f in fields(Scenario)}


def _spec_method(sc: Scenario, drafter: profiles.ModelProfile | None) -> str:
    if sc.speculative_k <= 0:
        return ""
    if sc.spec_method:
        return sc.spec_method
    if drafter is None:
        return "ngram"
    return drafter.draft_method


def build_config(scenario: Scenario, **overrides: Any) -> EngineConfig:
    """An engine config from a scenario; ``overrides`` (None = keep) come from the command line.

    ``gpu``, ``model``, ``engine`` and ``drafter`` are profile names or TOML paths. Raises
    ``KeyError`` / ``ProfileError`` for unknown profiles and ``SpecConfigError`` for a draft
    model vLLM would refuse.
    """
    o = {k: v for k, v in overrides.items() if v is not None}
    sc = replace(scenario, **{k: o.pop(k) for k in list(o) if k in _SCENARIO_KEYS})
    gpu = profiles.resolve(sc.gpu, "gpu")
    model = profiles.resolve(sc.model, "model")
    engine = profiles.resolve(sc.engine, "engine")
    drafter = profiles.resolve(sc.drafter, "model") if sc.drafter and sc.speculative_k > 0 else None
    method = _spec_method(sc, drafter)
    check_draft(method, model, drafter, engine.strict_draft_vocab)
    max_len = sc.max_model_len or model.max_model_len
    seqs, tokens, _ = batch_defaults(gpu, engine, max_len)
    cfg = EngineConfig(
        gpu=gpu,
        model=model,
        engine=engine,
        served_model_name=o.pop("served_model_name", model.name),
        max_model_len=max_len,
        max_num_seqs=sc.max_num_seqs or seqs,
        max_num_batched_tokens=o.pop("max_num_batched_tokens", tokens),
        gpu_memory_utilization=sc.gpu_memory_utilization,
        drafter=drafter if method != "ngram" else None,
        spec_method=method,
        speculative_k=sc.speculative_k if method else 0,
        acceptance=sc.acceptance,
        contention=sc.contention,
        kv_offloading_gib=sc.kv_offloading_gib,
        pd_role="decode" if sc.pd else "",
    )
    return replace(cfg, **o)
