"""Named scenarios: a GPU, a model and engine settings that tell one story each."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from infmon.sim import profiles
from infmon.sim.roofline import EngineConfig


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    summary: str
    gpu: str = "L40S"
    model: str = "Qwen/Qwen2.5-7B-Instruct"
    drafter: str | None = None
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    contention: float = 0.0
    quality_error_rate: float = 0.0
    extra: dict = field(default_factory=dict)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "baseline", "Qwen2.5-7B-Instruct bf16 on an L40S-class GPU (~57 tok/s single stream)"
        ),
        Scenario(
            "fp8",
            "the same model with FP8 weights: half the bytes per token, more KV, slight quality loss",
            model="Qwen/Qwen2.5-7B-Instruct-FP8",
            quality_error_rate=0.04,
        ),
        Scenario(
            "spec-good",
            "speculative decoding with Qwen2.5-0.5B drafting k=4 at high acceptance: faster single stream",
            drafter="Qwen/Qwen2.5-0.5B-Instruct",
            speculative_k=4,
            acceptance=(0.7, 0.6, 0.5, 0.4),
        ),
        Scenario(
            "spec-pitfall",
            "a large mismatched drafter (3B, k=7) with low acceptance: single stream ~58 -> ~16 tok/s, less KV",
            drafter="Qwen/Qwen2.5-3B-Instruct",
            speculative_k=7,
            acceptance=(0.1, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05),
        ),
        Scenario(
            "tiny-kv",
            "gpu_memory_utilization 0.36: ~0.6 GB of KV, preemptions under modest load",
            gpu_memory_utilization=0.36,
            max_model_len=8192,
        ),
        Scenario(
            "contention",
            "a noisy neighbour on the GPU: every step 60% slower, queue and KV unchanged",
            contention=0.6,
        ),
    )
}


def default_batching(gpu: profiles.GpuProfile) -> tuple[int, int]:
    """vLLM V1's defaults for the OpenAI server: bigger on >= 70 GB GPUs (max_num_seqs, tokens)."""
    return (1024, 8192) if gpu.memory_gb >= 70 else (256, 2048)


def build_config(scenario: Scenario, **overrides) -> EngineConfig:
    """An engine config from a scenario; ``overrides`` (None = keep) come from the command line."""
    o = {k: v for k, v in overrides.items() if v is not None}
    sc = replace(scenario, **{k: o.pop(k) for k in list(o) if k in Scenario.__dataclass_fields__})
    gpu = profiles.gpu(sc.gpu)
    model = profiles.model(sc.model)
    seqs, tokens = default_batching(gpu)
    drafter = profiles.model(sc.drafter) if sc.drafter and sc.speculative_k > 0 else None
    cfg = EngineConfig(
        gpu=gpu,
        model=model,
        served_model_name=o.pop("served_model_name", model.name),
        max_model_len=sc.max_model_len or model.max_model_len,
        max_num_seqs=sc.max_num_seqs or seqs,
        max_num_batched_tokens=o.pop("max_num_batched_tokens", tokens),
        gpu_memory_utilization=sc.gpu_memory_utilization,
        drafter=drafter,
        speculative_k=sc.speculative_k if drafter else 0,
        acceptance=sc.acceptance,
        contention=sc.contention,
    )
    return replace(cfg, **o)
