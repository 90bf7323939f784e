"""The simulator's ``/metrics``: a prometheus_client registry fed from engine steps.

Counters move only when tokens are delivered (the server calls ``on_step`` after the step's time
has passed), so ``generation_tokens_total`` always equals what clients have received.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Summary,
    gc_collector,
    generate_latest,
    platform_collector,
    process_collector,
)

from infmon.sim import metric_schema as ms
from infmon.sim.engine import Sequence, StepOutput, queued_at
from infmon.sim.kvcache import EvictionEvent
from infmon.sim.kvtransfer import HOST, P2P, KvMove
from infmon.sim.memory import MemoryBudget
from infmon.sim.roofline import EngineConfig

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class MetricsLevel:
    """What a response's ``metrics`` object holds (vLLM's two server flags)."""

    timing: bool
    """``--enable-per-request-metrics``."""
    spec: str
    """``--per-request-spec-decode-metrics``: ``none``, ``summary`` or ``detailed``."""
    k: int
    """Draft tokens per step (the histogram has k + 1 bins)."""


def _ms(a: float, b: float) -> float | None:
    return (b - a) * 1000 if a == a and b == b else None


def per_request_metrics(seq: Sequence, level: MetricsLevel) -> dict[str, Any]:
    """vLLM 0.32's per-request ``metrics`` object (``build_per_request_timing_metrics`` and
    ``RequestSpecDecodeMetrics.to_dict``): the engine's times, None fields left out."""
    out: dict[str, Any] = {}
    n = seq.output_len
    if level.timing:
        gen = _ms(seq.first_token_s, seq.last_token_s)
        infer = _ms(seq.scheduled_s, seq.last_token_s)
        values = {
            "time_to_first_token_ms": _ms(seq.scheduled_s, seq.first_token_s),
            "generation_time_ms": gen,
            "queue_time_ms": _ms(queued_at(seq), seq.scheduled_s),
            "mean_itl_ms": gen / (n - 1) if gen is not None and n > 1 else None,
            "tokens_per_second": n / infer * 1000 if infer else None,
        }
        out = {k: v for k, v in values.items() if v is not None}
    if level.spec != "none" and level.k:
        out["speculative_decoding"] = _spec_metrics(seq, level)
    return out


def _spec_metrics(seq: Sequence, level: MetricsLevel) -> dict[str, Any]:
    hist = [0] * (level.k + 1)
    for j in seq.spec_accepted_log:
        hist[min(j, level.k)] += 1
    steps, accepted = sum(hist), sum(seq.spec_accepted_log)
    drafted = sum(seq.spec_drafted_log)
    out: dict[str, Any] = {
        "mean_acceptance_length": 1.0 + accepted / steps if steps else 1.0,
        "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
        "acceptance_histogram": hist,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": level.k,
    }
    if level.spec == "detailed" and steps:
        out["per_step_accepted"] = list(seq.spec_accepted_log)
        out["per_step_drafted"] = list(seq.spec_drafted_log)
    return out


_V1_032_STATIC_LABELS = {
    "_block_size_resolved": "True",
    "cache_hit_alignment_tokens": "None",
    "enable_mamba_shared_prefix_checkpoint": "False",
    "hash_block_size": "None",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_layout": "None",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "auto",
    "prefix_cache_retention_interval": "0",
    "prefix_match_unit": "None",
    "replayssm_buffer_len": "16",
    "skip_page_size_padded": "None",
    "swa_bounded_replay": "True",
    "use_kda_recoverssm": "False",
    "use_replayssm": "False",
}
"""The rest of vLLM 0.32's ``CacheConfig`` labels, at the values a plain attention model has."""


def cpu_blocks(cfg: EngineConfig, mem: MemoryBudget) -> int:
    """Blocks the host offload tier holds (``--kv-offloading-size`` GiB)."""
    return int(cfg.kv_offloading_gib * 2**30 // (mem.kv_bytes_per_token * cfg.block_size))


def cache_config_labels(cfg: EngineConfig, mem: MemoryBudget, schema: str) -> dict[str, str]:
    """A subset of vLLM's ``CacheConfig`` fields, stringified as vLLM does."""
    labels = {
        "block_size": str(cfg.block_size),
        "cache_dtype": "auto",
        "enable_prefix_caching": str(cfg.enable_prefix_caching),
        "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
        "is_attention_free": "False",
        "num_cpu_blocks": str(cpu_blocks(cfg, mem)) if cfg.kv_offloading_gib > 0 else "None",
        "num_gpu_blocks": str(mem.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "sliding_window": "None",
    }
    if schema == "v1":
        labels |= {
            "engine": "0",
            "effective_attention_block_size": str(cfg.block_size),
            "kv_cache_memory_bytes": str(mem.kv_bytes),
            "kv_cache_size_tokens": str(mem.kv_tokens),
            "kv_cache_max_concurrency": str(round(mem.kv_tokens / cfg.max_model_len, 2)),
            "prefix_caching_hash_algo": "sha256",
            "user_specified_block_size": "False",
        } | _V1_032_STATIC_LABELS
        if cfg.kv_offloading_gib > 0:
            labels["kv_offloading_size"] = str(cfg.kv_offloading_gib)
    else:
        labels |= {"cpu_offload_gb": "0", "swap_space_bytes": str(4 * 2**30)}
    return labels


class SimMetrics:
    def __init__(self, cfg: EngineConfig, mem: MemoryBudget, schema: str = "v1") -> None:
        self.cfg, self.mem, self.schema = cfg, mem, schema
        self.registry = CollectorRegistry()
        self._build_registry()
        self.m: dict[str, Any] = {}
        self.c: dict[str, Any] = {}
        self._build(cfg, mem)
        self._build_http()

    def _build_registry(self) -> None:
        process_collector.ProcessCollector(registry=self.registry)
        platform_collector.PlatformCollector(registry=self.registry)
        gc_collector.GCCollector(registry=self.registry)

    def _build(self, cfg: EngineConfig, mem: MemoryBudget) -> None:
        base = ("model_name", "engine") if self.schema == "v1" else ("model_name",)
        self.base = (cfg.served_model_name, "0")[: len(base)]
        len_buckets = ms.buckets_1_2_5(cfg.max_model_len)
        for concept, kind, name, help_, extra, buckets in ms.families(
            self.schema,
            cfg.spec_enabled,
            cfg.kv_cache_metrics,
            cfg.compute_nans_in_logits,
            offload=cfg.kv_offloading_gib > 0,
            nixl=bool(cfg.pd_role),
        ):
            labels = base + extra if concept != "admission_rejections" else ("model_name", *extra)
            metric: Any
            if kind == "counter":
                metric = Counter(name, help_, labels, registry=self.registry)
            elif kind == "gauge":
                metric = Gauge(name, help_, labels, registry=self.registry)
            else:
                b = len_buckets if buckets == ms.LEN else buckets
                metric = Histogram(name, help_, labels, buckets=b, registry=self.registry)
            self.m[concept] = metric
            if extra:
                self._precreate(concept, metric, extra[0])
            else:
                self.c[concept] = metric.labels(*self.base)
        info = cache_config_labels(cfg, mem, self.schema)
        cfg_gauge = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            sorted(info),
            registry=self.registry,
        )
        cfg_gauge.labels(**info).set(1)
        if cfg.spec_enabled and self.schema == "v1":
            self._speculative_info(cfg)

    def _speculative_info(self, cfg: EngineConfig) -> None:
        """The speculative config as an info gauge, the shape of ``cache_config_info`` (SGLang
        and TensorRT-LLM publish one; vLLM does not yet): the drafter is named on the page."""
        info = {
            "method": str(cfg.spec_method),
            "model": cfg.drafter.name if cfg.drafter is not None else "None",
            "num_speculative_tokens": str(cfg.speculative_k),
        }
        Gauge(
            "vllm:speculative_config_info",
            "Information of the engine SpeculativeConfig",
            sorted(info),
            registry=self.registry,
        ).labels(**info).set(1)

    def _build_http(self) -> None:
        h, r = ms.HTTP_HELP, self.registry
        self.http: dict[str, Any] = {
            "requests": Counter(
                "http_requests", h["requests"], ("handler", "method", "status"), registry=r
            ),
            "request_size": Summary(
                "http_request_size_bytes", h["request_size"], ("handler",), registry=r
            ),
            "response_size": Summary(
                "http_response_size_bytes", h["response_size"], ("handler",), registry=r
            ),
            "highr": Histogram(
                "http_request_duration_highr_seconds",
                h["highr"],
                buckets=ms.HTTP_HIGHR_BUCKETS,
                registry=r,
            ),
            "duration": Histogram(
                "http_request_duration_seconds",
                h["duration"],
                ("handler", "method"),
                buckets=ms.HTTP_BUCKETS,
                registry=r,
            ),
        }

    def observe_http(
        self, handler: str, method: str, status: int, req_bytes: int, resp_bytes: int, dur_s: float
    ) -> None:
        """One answered request, as vLLM's HTTP instrumentator records it."""
        if handler in ms.HTTP_EXCLUDED:
            return
        self.http["requests"].labels(handler, method, f"{status // 100}xx").inc()
        self.http["request_size"].labels(handler).observe(req_bytes)
        self.http["response_size"].labels(handler).observe(resp_bytes)
        self.http["highr"].observe(dur_s)
        self.http["duration"].labels(handler, method).observe(dur_s)

    def _precreate(self, concept: str, metric: Any, label: str) -> None:
        if concept == "admission_rejections":
            for r in ms.ADMISSION_REASONS:
                metric.labels(self.base[0], r)
            return
        if concept == "spec_accepted_per_pos":
            values = tuple(str(i) for i in range(self.cfg.speculative_k))
        elif concept == "prompt_cached_by_source":
            values = ms.CACHED_SOURCES
        elif concept == "success" and self.schema == "v0":
            values = ms.V0_FINISHED
        else:
            values = ms.LABEL_VALUES[label]
        for v in values:
            self.c[f"{concept}:{v}"] = metric.labels(*self.base, v)
        if concept == "sleep_state":
            self.c["sleep_state:awake"].set(1)

    # -- updates --------------------------------------------------------------------------
    def _inc(self, concept: str, value: float) -> None:
        child = self.c.get(concept)
        if child is not None and value:
            child.inc(value)

    def _set(self, concept: str, value: float) -> None:
        child = self.c.get(concept)
        if child is not None:
            child.set(value)

    def _observe(self, concept: str, value: float) -> None:
        child = self.c.get(concept)
        if child is not None and not math.isnan(value):
            child.observe(value)

    def set_state(self, running: int, waiting: int, kv_usage: float, deferred: int = 0) -> None:
        """vLLM: waiting = capacity + deferred (requests whose KV is still moving in)."""
        self._set("running", running)
        self._set("waiting", waiting)
        self._set("waiting_by_reason:capacity", waiting - deferred)
        self._set("waiting_by_reason:deferred", deferred)
        self._set("kv_usage", kv_usage)

    def on_step(self, out: StepOutput, evictions: list[EvictionEvent] | None = None) -> None:
        self.set_state(out.running, out.waiting, out.kv_usage, out.deferred)
        self._inc("flops", out.flops)
        self._inc("read_bytes", out.read_bytes)
        self._inc("write_bytes", out.write_bytes)
        self._inc("prefix_queries", out.prefix_queries)
        self._inc("prefix_hits", out.prefix_hits)
        self._inc("prompt_cached_by_source:device", out.prefix_hits)
        self._inc("preemptions", out.preemptions)
        self._inc("prompt_tokens", out.prompt_done_tokens)
        cached, external = out.prompt_done_cached, out.prompt_done_external
        self._inc("prompt_by_source:local_compute", out.prompt_done_tokens - cached - external)
        self._inc("prompt_by_source:local_cache_hit", cached)
        self._inc("prompt_by_source:external_kv_transfer", external)
        self._inc("prompt_cached", cached + external)
        self._inc("ext_prefix_queries", out.external_queries)
        self._inc("ext_prefix_hits", out.external_hits)
        for move in out.moves:
            self._move(move)
        self._inc("generation_tokens", out.generation_tokens)
        if out.prompt_done_tokens or out.generation_tokens:
            # vLLM: prompt tokens of prefills that completed + tokens generated (not drafts)
            self._observe("iteration_tokens", out.prompt_done_tokens + out.generation_tokens)
        for ev in evictions or ():
            self._observe("kv_block_lifetime", ev.lifetime_s)
            self._observe("kv_block_idle", ev.idle_s)
            for gap in ev.reuse_gaps_s:
                self._observe("kv_block_reuse_gap", gap)
        if out.drafts:
            self._spec(out)
        if "prefix_hit_rate" in self.c and out.prefix_queries:
            self._set("prefix_hit_rate", out.prefix_hits / out.prefix_queries)

    def _move(self, move: KvMove) -> None:
        """One KV transfer: the offload connector's counters, or NIXL's per-transfer figures."""
        if move.kind == P2P:
            self._inc("prompt_cached_by_source:p2p", move.tokens)
            self._observe("nixl_xfer_time", move.time_s)
            self._observe("nixl_post_time", min(move.time_s, self.cfg.pd_link_latency_s))
            self._observe("nixl_bytes", move.nbytes)
            self._observe("nixl_descriptors", move.blocks * self.cfg.model.num_hidden_layers)
            return
        load = move.kind == HOST
        if load:
            self._inc("prompt_cached_by_source:host", move.tokens)
        d, t = ("load", "CPU_to_GPU") if load else ("store", "GPU_to_CPU")
        self._inc(f"off_{d}_bytes", move.nbytes)
        self._inc(f"off_{d}_time", move.time_s)
        self._observe(f"off_{d}_size", move.nbytes)
        self._inc(f"off_total_bytes:{t}", move.nbytes)
        self._inc(f"off_total_time:{t}", move.time_s)
        self._observe(f"off_size:{t}", move.nbytes)

    def _spec(self, out: StepOutput) -> None:
        self._inc("spec_drafts", out.drafts)
        self._inc("spec_draft_tokens", out.draft_tokens)
        self._inc("spec_accepted", out.accepted_tokens)
        for i, n in enumerate(out.accepted_per_pos):
            self._inc(f"spec_accepted_per_pos:{i}", n)
        self._inc("spec_emitted_v0", out.accepted_tokens + out.drafts)
        if "spec_rate_v0" in self.c and out.draft_tokens:
            self._set("spec_rate_v0", out.accepted_tokens / out.draft_tokens)
            self._set(
                "spec_efficiency_v0",
                (out.accepted_tokens + out.drafts) / (out.draft_tokens + out.drafts),
            )

    def observe_itl(self, gap_s: float) -> None:
        self._observe("itl", gap_s)
        self._observe("tpot_v0", gap_s)

    def on_admitted(self, max_tokens: int, max_tokens_given: bool) -> None:
        self._observe("req_n", 1)
        self._observe("req_max_gen_tokens", max_tokens)
        if max_tokens_given:
            self._observe("req_max_tokens", max_tokens)

    def on_first_token(self, seq: Sequence) -> None:
        self._observe("ttft", seq.first_token_s - seq.arrival_s)

    def on_finished(self, seq: Sequence) -> None:
        self._inc(f"success:{seq.finish_reason}", 1)
        if seq.finish_reason == "abort" and math.isnan(seq.first_token_s):
            return
        self._observe("req_prompt_tokens", seq.prompt_len)
        self._observe("req_generation_tokens", seq.output_len)
        self._observe("e2e", seq.finish_s - seq.arrival_s)
        self._observe("queue", seq.scheduled_s - queued_at(seq))
        self._observe("inference", seq.finish_s - seq.scheduled_s)
        self._observe("prefill", seq.first_token_s - seq.scheduled_s)
        self._observe("decode", seq.finish_s - seq.first_token_s)
        self._observe("prefill_kv_computed", seq.prompt_len - seq.cached_tokens)
        if seq.num_preemptions:
            self._observe("req_preemptions", seq.num_preemptions)
        if seq.output_len > 1:
            self._observe("tpot", (seq.finish_s - seq.first_token_s) / (seq.output_len - 1))

    def reset(self) -> None:
        """A simulated server restart: every series starts again from zero."""
        self.registry = CollectorRegistry()
        self._build_registry()
        self.m.clear()
        self.c.clear()
        self._build(self.cfg, self.mem)
        self._build_http()

    def render(self) -> bytes:
        return generate_latest(self.registry)
