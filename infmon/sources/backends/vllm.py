"""vLLM: the V1 engine (names as exposed since 0.7.1, newest first) and the old V0 engine."""

from __future__ import annotations

from dataclasses import replace

from infmon.sources.backends.table import BackendTable

_LATENCY = {
    "queue": ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests"),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
    "ttft": ("vllm:time_to_first_token_seconds",),
    "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    "tpot": ("vllm:request_time_per_output_token_seconds",),
    "e2e": ("vllm:e2e_request_latency_seconds",),
    "iteration_tokens": ("vllm:iteration_tokens_total",),
    "nixl_xfer_time": ("vllm:nixl_xfer_time_seconds",),
    "nixl_bytes": ("vllm:nixl_bytes_transferred",),
}
_LABELLED = {
    "waiting_by_reason": ("vllm:num_requests_waiting_by_reason", "reason"),
    "prompt_tokens_by_source": ("vllm:prompt_tokens_by_source_total", "source"),
    "prompt_tokens_cached_by_source": ("vllm:prompt_tokens_cached_by_source_total", "source"),
    "admission_rejections": ("vllm:admission_rejections_total", "reason"),
    "sleep_state": ("vllm:engine_sleep_state", "sleep_state"),
}
"""The 2025–26 families read per label value (``infmon.model.server.families`` says what each is)."""

VLLM_V1 = BackendTable(
    name="vllm-v1",
    prefix="vllm:",
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    counters={
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "preemptions": ("vllm:num_preemptions_total",),
        "prefix_cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "prefix_cache_queries": (
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ),
        "spec_drafts": ("vllm:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("vllm:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens": ("vllm:spec_decode_num_accepted_tokens_total",),
        "spec_accepted_per_pos": ("vllm:spec_decode_num_accepted_tokens_per_pos_total",),
        "prompt_tokens_cached": ("vllm:prompt_tokens_cached_total",),
        "kv_offload_load_bytes": ("vllm:kv_offload_load_bytes_total",),
        "kv_offload_store_bytes": ("vllm:kv_offload_store_bytes_total",),
        "kv_offload_load_time": ("vllm:kv_offload_load_time_total",),
        "kv_offload_store_time": ("vllm:kv_offload_store_time_total",),
        "nixl_failed_transfers": ("vllm:nixl_num_failed_transfers_total",),
        "nixl_transfers": ("vllm:nixl_xfer_time_seconds_count",),
        "est_flops": ("vllm:estimated_flops_per_gpu_total",),
        "est_read_bytes": ("vllm:estimated_read_bytes_per_gpu_total",),
        "est_write_bytes": ("vllm:estimated_write_bytes_per_gpu_total",),
    },
    finished=(("vllm:request_success_total", "finished_reason"),),
    histograms=_LATENCY,
    cache_config_info="vllm:cache_config_info",
    model_label="model_name",
    engine_labels=("model_name", "engine"),
    labelled=_LABELLED,
    lora_info="vllm:lora_requests_info",
    versions=(
        ("vllm:num_requests_waiting_by_reason", "≥0.20"),
        ("vllm:prompt_tokens_by_source_total", "≥0.16"),
        ("vllm:engine_sleep_state", "≥0.11.1"),
        ("vllm:gpu_cache_usage_perc&vllm:kv_cache_usage_perc", "0.9.2–0.11"),
        ("vllm:gpu_prefix_cache_hits_total&vllm:kv_cache_usage_perc", "0.9.2–0.11"),
        ("vllm:time_per_output_token_seconds_count", "≤0.14"),
        ("vllm:kv_cache_usage_perc", "≥0.9.2"),
        ("vllm:gpu_prefix_cache_queries_total", "0.8–0.11"),
    ),
    default_version="≥0.8.3",
)

VLLM_V0 = replace(
    VLLM_V1,
    name="vllm-v0",
    gauges={
        **VLLM_V1.gauges,
        "kv_cache_usage": ("vllm:gpu_cache_usage_perc",),
        "prefix_cache_hit_rate": ("vllm:gpu_prefix_cache_hit_rate",),
        "spec_acceptance_rate": ("vllm:spec_decode_draft_acceptance_rate",),
    },
    engine_labels=("model_name",),
    versions=(
        ("vllm:avg_generation_throughput_toks_per_s", "≤0.6.x"),
        ("vllm:num_requests_swapped", "≤0.9.0"),
        ("vllm:inter_token_latency_seconds_count", "0.10–0.11"),
    ),
    default_version="V0 engine (≤0.11)",
)

V1_ONLY_MARKERS = (
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:request_time_per_output_token_seconds_count",
)
V0_ONLY_MARKERS = (
    "vllm:num_requests_swapped",
    "vllm:cpu_cache_usage_perc",
    "vllm:gpu_prefix_cache_hit_rate",
    "vllm:spec_decode_efficiency",
    "vllm:avg_generation_throughput_toks_per_s",
)
