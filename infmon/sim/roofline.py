"""Step time: the simulator's analytic cost model (DESIGN.md section 4), with the costs that
published vLLM runs show and a bare roofline misses.

One forward pass over a batch costs ``layers x layer_latency + max(bytes / achieved bandwidth,
linear FLOPs / achieved GEMM FLOP/s + attention FLOPs / achieved attention FLOP/s)``: bytes are the
weights (at the quantised width) plus the KV read for every scheduled context; linear FLOPs are
``2 x decoder params x tokens`` plus the lm_head for the rows sampled; attention FLOPs grow with the
context each query token attends. An engine step adds vLLM's host work (per step and per running
sequence), and with speculative decoding the drafter's passes (a draft model's prefill too),
their launch overhead and the verification bookkeeping. Contention (a noisy neighbour on the GPU)
multiplies the whole step by ``1 + contention``.
"""

from __future__ import annotations

from dataclasses import dataclass

from infmon.sim.costmodel import FittedCost, step_time_s
from infmon.sim.profiles import EngineProfile, GpuProfile, ModelProfile


@dataclass(frozen=True, slots=True)
class EngineConfig:
    gpu: GpuProfile
    model: ModelProfile
    engine: EngineProfile
    served_model_name: str
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    enable_prefix_caching: bool = True
    drafter: ModelProfile | None = None
    spec_method: str = ""  # "draft_model", "eagle" or "ngram"; "" = off
    speculative_k: int = 0
    acceptance: tuple[float, ...] = ()  # mean conditional acceptance per draft position
    acceptance_concentration: float = 4.0  # per-request spread (Beta concentration)
    prompt_lookup_min: int = 2
    prompt_lookup_max: int = 5
    contention: float = 0.0
    kv_cache_metrics: bool = False
    compute_nans_in_logits: bool = False
    seed: int = 0
    fitted: FittedCost | None = None  # a server's own fitted step cost instead of the roofline
    num_gpu_blocks: int | None = None  # KV blocks as the server reported them (a fitted config)
    kv_offloading_gib: float = 0.0  # --kv-offloading-size: host memory for offloaded KV blocks
    host_link_gb_s: float = 25.0  # GPU <-> host copies (PCIe 4.0 x16, achieved)
    host_link_latency_s: float = 10e-6
    pd_role: str = ""  # "prefill" or "decode" pod of a P/D pair (NIXL); decode pulls prompts' KV
    pd_link_gb_s: float = 25.0  # the NIC between P/D pods (200 Gb/s RDMA, achieved)
    pd_link_latency_s: float = 0.5e-3  # NIXL handshake + post, per transfer

    @property
    def spec_enabled(self) -> bool:
        if self.speculative_k <= 0:
            return False
        return self.spec_method in ("ngram", "fitted") or self.drafter is not None


@dataclass(frozen=True, slots=True)
class PassLoad:
    """What one forward pass processes."""

    tokens: int  # query tokens through the decoder layers
    sampled: int  # rows whose logits are computed (lm_head)
    context_read: int  # KV tokens read, summed over sequences
    attn_pairs: float  # query tokens x attended context, summed over sequences


@dataclass(frozen=True, slots=True)
class PassCost:
    time_s: float
    flops: float
    read_bytes: float
    write_bytes: float

    def __add__(self, other: PassCost) -> PassCost:
        return PassCost(
            self.time_s + other.time_s,
            self.flops + other.flops,
            self.read_bytes + other.read_bytes,
            self.write_bytes + other.write_bytes,
        )


ZERO = PassCost(0.0, 0.0, 0.0, 0.0)


def pass_cost(
    gpu: GpuProfile, model: ModelProfile, load: PassLoad, lm_head_bytes: float | None = None
) -> PassCost:
    """One forward pass; ``lm_head_bytes`` overrides the head read (an EAGLE head's target's)."""
    if load.tokens <= 0:
        return ZERO
    head = model.lm_head_bytes if lm_head_bytes is None else lm_head_bytes
    weights = model.linear_params * model.weight_bytes_per_param
    read = weights + head + load.context_read * model.kv_bytes_per_token
    lin = 2.0 * model.linear_params * load.tokens + 2.0 * model.head_params * load.sampled
    heads_dim = model.num_attention_heads * model.dim_head
    attn = 4.0 * model.num_hidden_layers * heads_dim * load.attn_pairs
    compute_s = lin / gpu.achieved_flops(model.gemm_path(gpu)) + attn / gpu.attention_flops
    time_s = model.num_hidden_layers * gpu.layer_latency_s + max(
        read / gpu.achieved_bandwidth, compute_s
    )
    write = load.tokens * (
        model.kv_bytes_per_token + 2 * model.hidden_size * model.num_hidden_layers
    )
    return PassCost(time_s, lin + attn, read, write)


@dataclass(frozen=True, slots=True)
class StepLoad:
    """One engine step: the target's pass and what drafting adds."""

    target: PassLoad
    num_seqs: int
    spec_seqs: int = 0  # sequences drafting this step
    spec_context: int = 0  # their contexts, summed
    prefill_tokens: int = 0  # prompt tokens this step (a draft model prefills them too)
    prefill_pairs: float = 0.0


def drafter_cost(cfg: EngineConfig, step: StepLoad) -> PassCost:
    """k drafting passes (and a draft model's prefill of this step's prompt chunks)."""
    d = cfg.drafter
    if d is None or cfg.spec_method == "ngram":
        return ZERO
    head = cfg.model.lm_head_bytes if d.draft_method == "eagle" else None
    total = ZERO
    if step.prefill_tokens:
        pre = PassLoad(step.prefill_tokens, 0, step.prefill_tokens, step.prefill_pairs)
        total = total + pass_cost(cfg.gpu, d, pre, head)
    if step.spec_seqs:
        one = PassLoad(step.spec_seqs, step.spec_seqs, step.spec_context, float(step.spec_context))
        c = pass_cost(cfg.gpu, d, one, head)
        k = cfg.speculative_k
        total = total + PassCost(c.time_s * k, c.flops * k, c.read_bytes * k, c.write_bytes * k)
    return total


def host_s(cfg: EngineConfig, step: StepLoad) -> float:
    e = cfg.engine
    t = e.step_overhead_s + e.per_seq_s * step.num_seqs
    if step.spec_seqs and cfg.spec_enabled:
        t += e.spec_step_overhead_s + e.spec_per_seq_s * step.spec_seqs
        if cfg.spec_method == "ngram":
            t += e.ngram_per_seq_s * step.spec_seqs
        else:
            t += cfg.speculative_k * e.drafter_pass_overhead_s
    return t


def step_cost(cfg: EngineConfig, step: StepLoad) -> PassCost:
    """A whole engine step: host work, target pass, drafting, contention."""
    if cfg.fitted is not None:
        k = cfg.speculative_k if cfg.spec_enabled else 0
        return PassCost(step_time_s(cfg.fitted, step, k) * (1.0 + cfg.contention), 0.0, 0.0, 0.0)
    gpu = pass_cost(cfg.gpu, cfg.model, step.target) + drafter_cost(cfg, step)
    t = (host_s(cfg, step) + gpu.time_s) * (1.0 + cfg.contention)
    return PassCost(t, gpu.flops, gpu.read_bytes, gpu.write_bytes)


def kernel_time_s(cfg: EngineConfig, step: StepLoad, cost: PassCost) -> float:
    """The GPU's share of a step ``step_cost`` priced: without the host work and without the
    neighbour's slowdown (the neighbour's kernels fill the rest of the step)."""
    return max(0.0, cost.time_s / (1.0 + cfg.contention) - host_s(cfg, step))


def decode_step(cfg: EngineConfig, batch: int, context_tokens: int) -> StepLoad:
    """The step of ``batch`` sequences decoding at ``context_tokens`` each."""
    k = cfg.speculative_k if cfg.spec_enabled else 0
    n = batch * (k + 1)
    ctx = batch * (context_tokens + k + 1)
    target = PassLoad(n, n, ctx, float(n * (context_tokens + (k + 1) / 2)))
    if not k:
        return StepLoad(target, batch)
    return StepLoad(target, batch, batch, batch * context_tokens)


def predicted_decode_tok_s(cfg: EngineConfig, batch: int = 1, context_tokens: int = 512) -> float:
    """Steady-state output tokens/s of ``batch`` decoding sequences at a given context length."""
    from infmon.sim.spec import expected_tokens_per_step

    t = step_cost(cfg, decode_step(cfg, batch, context_tokens)).time_s
    per_step = expected_tokens_per_step(cfg) if cfg.spec_enabled else 1.0
    return batch * per_step / t
