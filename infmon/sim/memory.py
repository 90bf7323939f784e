"""GPU memory as vLLM sizes the KV cache, in GiB throughout, and vLLM's batching defaults.

vLLM's profiling run measures what is not KV cache: the weights, the activation peak of a dummy
forward pass over ``max_num_batched_tokens`` tokens (plus the sampler's logits for
``max_num_seqs`` rows), non-torch allocations (NCCL, cuBLAS) and, in the versions that count
them before sizing the cache, CUDA graphs. The KV cache gets ``total x gpu_memory_utilization``
minus all that, in whole blocks. Without chunked prefill (V0 with ``max_model_len`` up to 32K)
the batch budget is at least ``max_model_len``, so a longer ``max_model_len`` means a bigger
profiling peak and fewer KV blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infmon.sim.profiles import GIB, EngineProfile, GpuProfile, ModelProfile
from infmon.sim.roofline import EngineConfig


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    total_gib: float
    requested_gib: float
    weights_gib: float
    drafter_weights_gib: float
    activation_gib: float
    non_torch_gib: float
    cudagraph_gib: float
    kv_gib: float
    kv_bytes_per_token: int
    num_gpu_blocks: int
    block_size: int

    @property
    def kv_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    @property
    def kv_bytes(self) -> int:
        return self.num_gpu_blocks * self.block_size * self.kv_bytes_per_token


def batch_defaults(
    gpu: GpuProfile, engine: EngineProfile, max_model_len: int
) -> tuple[int, int, bool]:
    """(max_num_seqs, max_num_batched_tokens, chunked prefill) for the OpenAI server.

    V1 (``EngineArgs.get_batch_defaults``): 1024 / 8192 on devices of at least 70 GiB that are not
    A100s, else 256 / 2048; then tokens <= seqs x max_model_len and seqs <= tokens. V0 (0.6): 256
    sequences; chunked prefill only above ``chunked_prefill_above_len``, and without it the token
    budget is max(max_model_len, 2048).
    """
    chunked = max_model_len > engine.chunked_prefill_above_len
    if engine.batch_defaults == "v0":
        seqs, tokens = 256, 2048 if chunked else max(max_model_len, 2048)
        return seqs, tokens, chunked
    big = gpu.memory_gib >= 70 and "a100" not in gpu.name.lower()
    seqs, tokens = (1024, 8192) if big else (256, 2048)
    if not chunked:
        tokens = max(tokens, max_model_len)
    tokens = min(tokens, seqs * max_model_len)
    return min(seqs, tokens), tokens, chunked


def activation_peak_bytes(model: ModelProfile, tokens: int, seqs: int) -> float:
    """The dummy forward pass's peak: the MLP's inputs and outputs, then the sampler's logits."""
    forward = tokens * (2 * model.hidden_size + 3 * model.intermediate_size) * 2.0
    logits = min(seqs, tokens) * model.vocab_size * 4.0 * 2  # fp32 logits and probabilities
    return forward + logits


def memory_budget(cfg: EngineConfig) -> MemoryBudget:
    """What the profiling run leaves for KV: utilisation x memory - weights - activations - …
    (or, for a fitted server, the blocks it reported)."""
    if cfg.num_gpu_blocks is not None:
        return MemoryBudget(
            *(0.0,) * 8,
            kv_bytes_per_token=0,
            num_gpu_blocks=cfg.num_gpu_blocks,
            block_size=cfg.block_size,
        )
    drafter = cfg.drafter if cfg.spec_enabled else None
    weights = cfg.model.weight_bytes / GIB
    drafter_w = drafter.weight_bytes / GIB if drafter is not None else 0.0
    act = activation_peak_bytes(cfg.model, cfg.max_num_batched_tokens, cfg.max_num_seqs)
    if drafter is not None:
        act += activation_peak_bytes(drafter, cfg.max_num_batched_tokens, 0) * 0.5
    act_gib = act / GIB
    requested = cfg.gpu.memory_gib * cfg.gpu_memory_utilization
    e = cfg.engine
    kv = requested - weights - drafter_w - act_gib - e.non_torch_gib - e.cudagraph_gib
    per_token = cfg.model.kv_bytes_per_token
    if drafter is not None:
        per_token += drafter.kv_bytes_per_token
    blocks = max(0, math.floor(kv * GIB / (per_token * cfg.block_size)))
    return MemoryBudget(
        total_gib=cfg.gpu.memory_gib,
        requested_gib=requested,
        weights_gib=weights,
        drafter_weights_gib=drafter_w,
        activation_gib=act_gib,
        non_torch_gib=e.non_torch_gib,
        cudagraph_gib=e.cudagraph_gib,
        kv_gib=blocks * cfg.block_size * per_token / GIB,
        kv_bytes_per_token=per_token,
        num_gpu_blocks=blocks,
        block_size=cfg.block_size,
    )
