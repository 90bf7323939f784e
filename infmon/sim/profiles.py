"""GPU and model profiles as data, with their published figures.

GPU figures are the vendors' datasheet numbers (dense, without structured sparsity):
memory capacity in GB (10^9 bytes), memory bandwidth in GB/s, peak dense BF16 and FP8 tensor
FLOPs. Model figures are from each model's published ``config.json`` and model card: parameter
count, layers, KV heads, head size, maximum context.

``overhead_gb`` (non-KV, non-weight memory vLLM's profiling run reserves: activations, CUDA graphs,
allocator slack) is an assumption of this simulator, not a published figure.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
TFLOPS = 1e12


@dataclass(frozen=True, slots=True)
class GpuProfile:
    name: str
    memory_gb: float
    bandwidth_gb_s: float
    bf16_tflops: float
    fp8_tflops: float | None  # None: no FP8 tensor cores (FP8 weights run as W8A16)
    overhead_gb: float = 1.5

    @property
    def memory_bytes(self) -> float:
        return self.memory_gb * GB

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * GB

    def peak_flops(self, dtype: str) -> float:
        if dtype == "fp8" and self.fp8_tflops is not None:
            return self.fp8_tflops * TFLOPS
        return self.bf16_tflops * TFLOPS


@dataclass(frozen=True, slots=True)
class ModelProfile:
    name: str
    params_b: float  # billions of parameters
    layers: int
    kv_heads: int
    head_dim: int
    max_model_len: int
    dtype: str = "bf16"  # weight dtype: bf16 or fp8
    kv_dtype_bytes: int = 2  # KV cache in bf16 ("auto")

    @property
    def params(self) -> float:
        return self.params_b * 1e9

    @property
    def weight_bytes_per_param(self) -> float:
        return 1.0 if self.dtype == "fp8" else 2.0

    @property
    def weight_bytes(self) -> float:
        return self.params * self.weight_bytes_per_param

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, every KV head: 2 x layers x kv_heads x head_dim x dtype bytes."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_dtype_bytes


GPUS: dict[str, GpuProfile] = {
    g.name: g
    for g in (
        GpuProfile("L4", memory_gb=24, bandwidth_gb_s=300, bf16_tflops=121, fp8_tflops=242.5),
        GpuProfile("L40S", memory_gb=48, bandwidth_gb_s=864, bf16_tflops=362.05, fp8_tflops=733),
        GpuProfile(
            "A100-80GB", memory_gb=80, bandwidth_gb_s=2039, bf16_tflops=312, fp8_tflops=None
        ),
        GpuProfile(
            "H100-80GB", memory_gb=80, bandwidth_gb_s=3350, bf16_tflops=989, fp8_tflops=1979
        ),
        GpuProfile("H200", memory_gb=141, bandwidth_gb_s=4800, bf16_tflops=989, fp8_tflops=1979),
    )
}

_QWEN7 = {"params_b": 7.61, "layers": 28, "kv_heads": 4, "head_dim": 128, "max_model_len": 32768}
_LLAMA70 = {"params_b": 70.6, "layers": 80, "kv_heads": 8, "head_dim": 128, "max_model_len": 131072}

MODELS: dict[str, ModelProfile] = {
    m.name: m
    for m in (
        ModelProfile("Qwen/Qwen2.5-7B-Instruct", **_QWEN7),
        ModelProfile("Qwen/Qwen2.5-7B-Instruct-FP8", **_QWEN7, dtype="fp8"),
        ModelProfile("Qwen/Qwen2.5-0.5B-Instruct", 0.494, 24, 2, 64, 32768),
        ModelProfile("Qwen/Qwen2.5-1.5B-Instruct", 1.54, 28, 2, 128, 32768),
        ModelProfile("Qwen/Qwen2.5-3B-Instruct", 3.09, 36, 2, 128, 32768),
        ModelProfile("meta-llama/Llama-3.1-70B-Instruct", **_LLAMA70),
        ModelProfile("meta-llama/Llama-3.1-70B-Instruct-FP8", **_LLAMA70, dtype="fp8"),
    )
}


def _lookup(table: dict, name: str, what: str):
    if name in table:
        return table[name]
    lowered = {k.lower(): v for k, v in table.items()}
    short = {k.split("/")[-1].lower(): v for k, v in table.items()}
    key = name.lower()
    if key in lowered:
        return lowered[key]
    if key in short:
        return short[key]
    raise KeyError(f"unknown {what} {name!r}; known: {', '.join(table)}")


def gpu(name: str) -> GpuProfile:
    return _lookup(GPUS, name, "GPU")


def model(name: str) -> ModelProfile:
    return _lookup(MODELS, name, "model")
