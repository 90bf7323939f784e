"""SGLang, Hugging Face TGI and llama.cpp server tables (METRICS.md sections 7–9)."""

from __future__ import annotations

from infmon.sources.backends.table import BackendTable

SGLANG = BackendTable(
    name="sglang",
    prefix="sglang:",
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
        "prefix_cache_hit_rate": ("sglang:cache_hit_rate",),
        "spec_acceptance_rate": ("sglang:spec_accept_rate",),
        "spec_acceptance_length": ("sglang:spec_accept_length",),
    },
    counters={
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
    },
    finished=(("sglang:num_requests_total", None),),
    histograms={
        "queue": ("sglang:queue_time_seconds",),
        "ttft": ("sglang:time_to_first_token_seconds",),
        "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "e2e": ("sglang:e2e_request_latency_seconds",),
    },
    model_label="model_name",
    engine_labels=("model_name",),
    versions=(
        ("sglang:time_per_output_token_seconds_count", "≤0.4.4 (early 2025 names)"),
        ("sglang:inter_token_latency_seconds_count", "≥0.4.5"),
    ),
)

TGI = BackendTable(
    name="tgi",
    prefix="tgi_",
    gauges={
        "running": ("tgi_batch_current_size",),
        "waiting": ("tgi_queue_size",),
    },
    counters={
        "prompt_tokens": ("tgi_request_input_length_sum",),
        "generation_tokens": ("tgi_request_generated_tokens_sum",),
    },
    finished=(("tgi_request_success", None), ("tgi_request_success_total", None)),
    histograms={
        "queue": ("tgi_request_queue_duration",),
        "tpot": ("tgi_request_mean_time_per_token_duration",),
        "e2e": ("tgi_request_duration",),
    },
    versions=(("tgi_request_count", "TGI router (Rust)"),),
    default_version="tgi_-compatible exporter",
)

LLAMACPP = BackendTable(
    name="llamacpp",
    prefix="llamacpp:",
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
    },
    counters={
        "prompt_tokens": ("llamacpp:prompt_tokens_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        # prompt_tokens_total counts the tokens evaluated, the cached ones apart: a hit rate
        # is cached / (cached + evaluated).
        "prefix_cache_hits": ("llamacpp:prompt_tokens_cached_total",),
        "prefix_cache_misses": ("llamacpp:prompt_tokens_total",),
        "spec_drafts": ("llamacpp:spec_decode_num_drafts_total",),
        "spec_draft_tokens": ("llamacpp:spec_decode_num_draft_tokens_total",),
        "spec_accepted_tokens": ("llamacpp:spec_decode_num_accepted_tokens_total",),
    },
    versions=(("llamacpp:kv_cache_usage_ratio", "before mid-2025 (PR #13660)"),),
    default_version="mid-2025 or newer",
)

DCGM = BackendTable(name="dcgm", prefix="DCGM_FI_", default_version="dcgm-exporter")
"""A GPU exporter page: no server concepts, GPUs only."""
