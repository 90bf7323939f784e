"""GPU, model and engine profiles: TOML files, the built-in ones under ``infmon/sim/data/``.

A GPU profile holds datasheet figures (memory in GiB as the driver reports it, bandwidth in GB/s,
dense TFLOPs) and the fractions of them that vLLM's kernels achieve. A model profile holds the
fields of the model's Hugging Face ``config.json`` under the same names (``hidden_size``,
``num_key_value_heads``, ``[quantization_config] quant_method`` …); parameter counts and KV bytes
are computed from them. An engine profile holds the host-side costs of one vLLM generation. The
fitted numbers carry their sources in the files (``python bench/sim_fidelity.py`` checks them).
"""

from __future__ import annotations

import sys
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GIB = float(2**30)
GB = 1e9
TFLOPS = 1e12
DATA = Path(__file__).resolve().parent / "data"


class ProfileError(ValueError):
    """A profile file that is missing, unreadable or lacks a field."""


@dataclass(frozen=True, slots=True)
class GpuProfile:
    name: str
    memory_gib: float
    bandwidth_gb_s: float
    bf16_tflops: float
    fp8_tflops: float | None = None  # None: no FP8 tensor cores (FP8 weights run as W8A16)
    bandwidth_fraction: float = 0.85
    bf16_flops_fraction: float = 0.6
    fp8_flops_fraction: float = 0.5
    w8a16_flops_fraction: float = 0.35
    attention_flops_fraction: float = 0.4
    layer_latency_s: float = 0.0  # fixed kernel time per decoder layer and pass
    source: str = ""
    power_limit_w: float | None = None  # board power limit (the simulated DCGM series)
    idle_power_w: float | None = None
    max_sm_clock_mhz: float | None = None
    board_source: str = ""

    @property
    def achieved_bandwidth(self) -> float:
        return self.bandwidth_gb_s * GB * self.bandwidth_fraction

    def achieved_flops(self, path: str) -> float:
        """Dense FLOP/s of a GEMM path: ``bf16``, ``w8a8`` (FP8 tensor cores) or ``w8a16``."""
        if path == "w8a8" and self.fp8_tflops is not None:
            return self.fp8_tflops * TFLOPS * self.fp8_flops_fraction
        if path == "w8a16":
            return self.bf16_tflops * TFLOPS * self.w8a16_flops_fraction
        return self.bf16_tflops * TFLOPS * self.bf16_flops_fraction

    @property
    def attention_flops(self) -> float:
        return self.bf16_tflops * TFLOPS * self.attention_flops_fraction


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A decoder-only transformer as its ``config.json`` describes it."""

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    head_dim: int = 0  # 0: hidden_size / num_attention_heads
    tie_word_embeddings: bool = False
    torch_dtype: str = "bfloat16"
    quant_method: str | None = None  # quantization_config.quant_method
    quant_bits: int = 16
    draft_method: str = "draft_model"  # or "eagle": a head sharing the target's lm_head
    kv_dtype_bytes: int = 2  # KV cache "auto": the activation dtype
    source: str = ""

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def layer_params(self) -> float:
        h, d = self.hidden_size, self.dim_head
        attn = h * d * (2 * self.num_attention_heads + 2 * self.num_key_value_heads)
        mlp = 3 * h * self.intermediate_size
        fuse = 2 * h * h if self.draft_method == "eagle" else 0
        return float(attn + mlp + fuse)

    @property
    def linear_params(self) -> float:
        """Parameters of the decoder layers (what quantisation shrinks)."""
        return self.num_hidden_layers * self.layer_params

    @property
    def head_params(self) -> float:
        return float(self.vocab_size * self.hidden_size)

    @property
    def params(self) -> float:
        embeddings = self.head_params * (1 if self.tie_word_embeddings else 2)
        return self.linear_params + (0.0 if self.draft_method == "eagle" else embeddings)

    @property
    def weight_bytes_per_param(self) -> float:
        if self.quant_method == "fp8":
            return 1.0
        if self.quant_method in ("gptq", "awq", "compressed-tensors"):
            return self.quant_bits / 8 * 1.03  # packed weights plus group scales
        return 2.0

    @property
    def weight_bytes(self) -> float:
        """Bytes resident on the GPU; an EAGLE head reuses the target's embedding and lm_head."""
        if self.draft_method == "eagle":
            return self.linear_params * 2.0
        return (
            self.linear_params * self.weight_bytes_per_param
            + (self.params - self.linear_params) * 2
        )

    @property
    def lm_head_bytes(self) -> float:
        return self.head_params * 2.0

    def gemm_path(self, gpu: GpuProfile) -> str:
        """FP8 weights run W8A8 on FP8 tensor cores, else W8A16 (Marlin); int8 GPTQ is W8A16."""
        if self.quant_method == "fp8":
            return "w8a8" if gpu.fp8_tflops is not None else "w8a16"
        if self.quant_method is not None:
            return "w8a16"
        return "bf16"

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V, every layer, every KV head: 2 x layers x kv_heads x head_dim x dtype bytes."""
        return (
            2
            * self.num_hidden_layers
            * self.num_key_value_heads
            * self.dim_head
            * self.kv_dtype_bytes
        )

    @property
    def max_model_len(self) -> int:
        return self.max_position_embeddings

    @property
    def dtype(self) -> str:
        return "fp8" if self.quant_method == "fp8" else ("int8" if self.quant_method else "bf16")


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """Host-side costs of one vLLM generation and how it profiles memory."""

    name: str
    vllm_version: str
    step_overhead_s: float  # scheduler, input preparation, sampler, detokeniser: per step
    per_seq_s: float  # the same, per running sequence
    request_overhead_s: float  # API server: template, tokeniser, first-chunk output
    spec_step_overhead_s: float = 0.0  # rejection sampler and bookkeeping, per spec step
    drafter_pass_overhead_s: float = 0.0  # launch cost of one drafting pass
    spec_per_seq_s: float = 0.0  # scoring bookkeeping per drafting sequence and step
    ngram_per_seq_s: float = 0.0  # CPU prompt lookup, per sequence and step
    chunked_prefill_above_len: int = 0  # 0: always chunked (V1); V0: only above 32K
    batch_defaults: str = "v1"  # the rule of EngineArgs.get_batch_defaults (or "v0")
    strict_draft_vocab: bool = True  # refuse a draft model whose vocab_size differs
    non_torch_gib: float = 0.25  # NCCL/cuBLAS buffers counted by the profiling run
    cudagraph_gib: float = 0.0  # CUDA-graph memory counted before the KV cache is sized
    source: str = ""


def _flatten(doc: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in doc.items() if not isinstance(v, dict)}
    for section in ("achieved", "host", "memory", "infmon", "board"):
        out.update(doc.get(section, {}))
    quant = doc.get("quantization_config")
    if quant:
        out["quant_method"] = str(quant.get("quant_method", "")).lower() or None
        out["quant_bits"] = int(quant.get("bits", 8))
    return out


def _required(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


def _build(cls: type, doc: dict[str, Any], where: str) -> Any:
    """The profile, or a ``ProfileError`` naming the file and each missing or mistyped field."""
    flat = _flatten(doc)
    known = {f.name for f in fields(cls)}
    args = {k: v for k, v in flat.items() if k in known}
    missing = [name for name in _required(cls) if name not in args]
    if missing:
        s = "s" if len(missing) > 1 else ""
        raise ProfileError(
            f"{where}: {cls.__name__} needs the field{s} {', '.join(missing)} (not in the file)"
        )
    for f in fields(cls):
        if f.name in args and not _type_ok(args[f.name], str(f.type)):
            raise ProfileError(
                f"{where}: field {f.name} must be {f.type}, not {type(args[f.name]).__name__} "
                f"{args[f.name]!r}"
            )
    return cls(**args)


def _type_ok(value: object, annotation: str) -> bool:
    """TOML values against the dataclass annotation (ints pass for floats, not the reverse)."""
    if value is None:
        return "None" in annotation
    if isinstance(value, bool):
        return "bool" in annotation
    if isinstance(value, int):
        return "int" in annotation or "float" in annotation
    if isinstance(value, float):
        return "float" in annotation
    if isinstance(value, str):
        return "str" in annotation
    return False


def load_file(path: str | Path, cls: type) -> Any:
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(f"cannot read profile {p}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {p} is not valid TOML: {exc}") from None
    return _build(cls, doc, str(p))


def _builtin(kind: str, cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted((DATA / kind).glob("*.toml")):
        prof = load_file(path, cls)
        out[prof.name] = prof
    return out


GPUS: dict[str, GpuProfile] = _builtin("gpus", GpuProfile)
MODELS: dict[str, ModelProfile] = _builtin("models", ModelProfile)
ENGINES: dict[str, EngineProfile] = _builtin("engines", EngineProfile)


def _lookup(table: dict[str, Any], name: str, what: str) -> Any:
    if name in table:
        return table[name]
    key = name.lower()
    for k, v in table.items():
        if key in (k.lower(), k.split("/")[-1].lower()):
            return v
    raise KeyError(f"unknown {what} {name!r}; known: {', '.join(table)}")


def gpu(name: str) -> GpuProfile:
    return _lookup(GPUS, name, "GPU")  # type: ignore[no-any-return]


def model(name: str) -> ModelProfile:
    return _lookup(MODELS, name, "model")  # type: ignore[no-any-return]


def engine(name: str) -> EngineProfile:
    return _lookup(ENGINES, name, "engine profile")  # type: ignore[no-any-return]


def resolve(name_or_path: str, kind: str) -> Any:
    """A built-in profile by name, or a TOML file by path (``kind``: gpu, model, engine)."""
    cls = {"gpu": GpuProfile, "model": ModelProfile, "engine": EngineProfile}[kind]
    if name_or_path.endswith(".toml") or Path(name_or_path).is_file():
        return load_file(name_or_path, cls)
    return {"gpu": gpu, "model": model, "engine": engine}[kind](name_or_path)
