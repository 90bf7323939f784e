"""Roofline step time and memory budget: the simulator's analytic model (DESIGN.md section 4).

A forward pass costs ``max(bytes_read / bandwidth, flops / peak_flops)``: bytes are the weights plus
the KV cache read for every scheduled context, flops ~= 2 x params x tokens. A step adds a fixed
overhead (scheduling, kernel launches) and, with speculative decoding, k drafter passes. Contention
(a noisy neighbour on the GPU) multiplies the whole step by ``1 + contention``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infmon.sim.profiles import GB, GpuProfile, ModelProfile


@dataclass(frozen=True, slots=True)
class EngineConfig:
    gpu: GpuProfile
    model: ModelProfile
    served_model_name: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    enable_prefix_caching: bool = True
    drafter: ModelProfile | None = None
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()  # conditional per-position acceptance probabilities
    contention: float = 0.0
    step_overhead_s: float = 0.0002
    drafter_pass_overhead_s: float = 0.0001
    seed: int = 0

    @property
    def spec_enabled(self) -> bool:
        return self.drafter is not None and self.speculative_k > 0


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    weights_gb: float
    drafter_weights_gb: float
    kv_gb: float
    kv_bytes_per_token: int
    num_gpu_blocks: int
    block_size: int

    @property
    def kv_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


def memory_budget(cfg: EngineConfig) -> MemoryBudget:
    """What vLLM's profiling run leaves for KV: utilisation x HBM - weights - overhead."""
    drafter_w = cfg.drafter.weight_bytes if cfg.spec_enabled else 0.0
    kv_per_token = cfg.model.kv_bytes_per_token
    if cfg.spec_enabled:
        kv_per_token += cfg.drafter.kv_bytes_per_token
    usable = cfg.gpu.memory_bytes * cfg.gpu_memory_utilization
    kv_bytes = usable - cfg.model.weight_bytes - drafter_w - cfg.gpu.overhead_gb * GB
    blocks = max(0, math.floor(kv_bytes / (kv_per_token * cfg.block_size)))
    return MemoryBudget(
        weights_gb=cfg.model.weight_bytes / GB,
        drafter_weights_gb=drafter_w / GB,
        kv_gb=max(0.0, kv_bytes) / GB,
        kv_bytes_per_token=kv_per_token,
        num_gpu_blocks=blocks,
        block_size=cfg.block_size,
    )


def pass_time_s(gpu: GpuProfile, model: ModelProfile, tokens: int, context_tokens: int) -> float:
    """One forward pass over ``tokens`` new tokens attending ``context_tokens`` cached ones."""
    bytes_read = model.weight_bytes + context_tokens * model.kv_bytes_per_token
    flops = 2.0 * model.params * tokens
    return max(bytes_read / gpu.bandwidth_bytes_s, flops / gpu.peak_flops(model.dtype))


def step_time_s(
    cfg: EngineConfig, tokens: int, context_tokens: int, spec_seqs: int, spec_context: int
) -> float:
    """A whole engine step: target pass, k drafter passes (if drafting), overhead, contention."""
    t = pass_time_s(cfg.gpu, cfg.model, tokens, context_tokens) + cfg.step_overhead_s
    if spec_seqs and cfg.spec_enabled:
        one = pass_time_s(cfg.gpu, cfg.drafter, spec_seqs, spec_context)
        t += cfg.speculative_k * (one + cfg.drafter_pass_overhead_s)
    return t * (1.0 + cfg.contention)


def expected_tokens_per_draft(acceptance: tuple[float, ...], k: int) -> float:
    """1 + E[accepted]: position i is accepted only if 0..i-1 were (conditional probabilities)."""
    total, p = 1.0, 1.0
    for i in range(k):
        p *= acceptance[i] if i < len(acceptance) else 0.0
        total += p
    return total


def marginal_acceptance(acceptance: tuple[float, ...], k: int) -> list[float]:
    """Probability that draft position i is accepted (what vLLM's per-position counter rates show)."""
    out, p = [], 1.0
    for i in range(k):
        p *= acceptance[i] if i < len(acceptance) else 0.0
        out.append(p)
    return out


def predicted_decode_tok_s(cfg: EngineConfig, batch: int = 1, context_tokens: int = 512) -> float:
    """Steady-state output tokens/s of ``batch`` decoding sequences at a given context length."""
    if cfg.spec_enabled:
        k = cfg.speculative_k
        t = step_time_s(cfg, batch * (k + 1), batch * context_tokens, batch, batch * context_tokens)
        return batch * expected_tokens_per_draft(cfg.acceptance, k) / t
    return batch / step_time_s(cfg, batch, batch * context_tokens, 0, 0)
