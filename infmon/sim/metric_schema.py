"""vLLM's metric families as data: V1 (as vLLM 0.32 exposes them) and the older V0 names.

Names, types, label sets, HELP texts and buckets follow the real page
``shared/fixtures/metrics/vllm-v1-0.32-cpu-tiny-gpt2.prom`` and ``shared/fixtures/METRICS.md``.
Counters are registered without ``_total`` (prometheus_client adds it, as in vLLM).
Each row: (concept, kind, name, help, extra label names, buckets or a bucket rule).
"""

from __future__ import annotations

from infmon.sim import connector_schema

LATENCY_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
N_BUCKETS = (1, 2, 5, 10, 20)
PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
LEN = "1-2-5 up to max_model_len"

# V0 (vLLM 0.7.x) buckets, before the 2025-04 extension.
V0_TTFT = TTFT_BUCKETS[:16]
V0_TPOT = ITL_BUCKETS[:13]
V0_LATENCY = LATENCY_BUCKETS[:15]
V0_ITERATION = (1, 2, 4, *range(8, 513, 8))


def buckets_1_2_5(max_value: int) -> tuple[int, ...]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, ... while <= max_value."""
    out: list[int] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > max_value:
                return tuple(out)
            out.append(v)
        exp += 1


_P = "vllm:"
V1 = (
    (
        "flops",
        "counter",
        "estimated_flops_per_gpu",
        "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
        (),
        None,
    ),
    (
        "read_bytes",
        "counter",
        "estimated_read_bytes_per_gpu",
        "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
        (),
        None,
    ),
    (
        "write_bytes",
        "counter",
        "estimated_write_bytes_per_gpu",
        "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
        (),
        None,
    ),
    (
        "running",
        "gauge",
        "num_requests_running",
        "Number of requests in model execution batches.",
        (),
        None,
    ),
    (
        "waiting",
        "gauge",
        "num_requests_waiting",
        "Number of requests waiting to be processed.",
        (),
        None,
    ),
    (
        "waiting_by_reason",
        "gauge",
        "num_requests_waiting_by_reason",
        "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        ("reason",),
        None,
    ),
    (
        "sleep_state",
        "gauge",
        "engine_sleep_state",
        "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        ("sleep_state",),
        None,
    ),
    (
        "kv_usage",
        "gauge",
        "kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.",
        (),
        None,
    ),
    (
        "prefix_queries",
        "counter",
        "prefix_cache_queries",
        "Prefix cache queries, in terms of number of queried tokens.",
        (),
        None,
    ),
    (
        "prefix_hits",
        "counter",
        "prefix_cache_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        (),
        None,
    ),
    (
        "ext_prefix_queries",
        "counter",
        "external_prefix_cache_queries",
        "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        (),
        None,
    ),
    (
        "ext_prefix_hits",
        "counter",
        "external_prefix_cache_hits",
        "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        (),
        None,
    ),
    (
        "mm_queries",
        "counter",
        "mm_cache_queries",
        "Multi-modal cache queries, in terms of number of queried items.",
        (),
        None,
    ),
    (
        "mm_hits",
        "counter",
        "mm_cache_hits",
        "Multi-modal cache hits, in terms of number of cached items.",
        (),
        None,
    ),
    (
        "preemptions",
        "counter",
        "num_preemptions",
        "Cumulative number of preemption from the engine.",
        (),
        None,
    ),
    ("prompt_tokens", "counter", "prompt_tokens", "Number of prefill tokens processed.", (), None),
    (
        "prompt_by_source",
        "counter",
        "prompt_tokens_by_source",
        "Number of prompt tokens by source.",
        ("source",),
        None,
    ),
    (
        "prompt_cached",
        "counter",
        "prompt_tokens_cached",
        "Number of cached prompt tokens (local + external).",
        (),
        None,
    ),
    (
        "prompt_cached_by_source",
        "counter",
        "prompt_tokens_cached_by_source",
        "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
        ("source",),
        None,
    ),
    (
        "generation_tokens",
        "counter",
        "generation_tokens",
        "Number of generation tokens processed.",
        (),
        None,
    ),
    (
        "success",
        "counter",
        "request_success",
        "Count of successfully processed requests.",
        ("finished_reason",),
        None,
    ),
    (
        "admission_rejections",
        "counter",
        "admission_rejections",
        "Number of admission attempts rejected by a queue limit, by reason.",
        ("reason",),
        None,
    ),
    (
        "req_prompt_tokens",
        "histogram",
        "request_prompt_tokens",
        "Number of prefill tokens processed.",
        (),
        LEN,
    ),
    (
        "req_generation_tokens",
        "histogram",
        "request_generation_tokens",
        "Number of generation tokens processed.",
        (),
        LEN,
    ),
    (
        "iteration_tokens",
        "histogram",
        "iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        (),
        ITERATION_BUCKETS,
    ),
    (
        "req_max_gen_tokens",
        "histogram",
        "request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        (),
        LEN,
    ),
    (
        "req_n",
        "histogram",
        "request_params_n",
        "Histogram of the n request parameter.",
        (),
        N_BUCKETS,
    ),
    (
        "req_max_tokens",
        "histogram",
        "request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        (),
        LEN,
    ),
    (
        "ttft",
        "histogram",
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        (),
        TTFT_BUCKETS,
    ),
    (
        "itl",
        "histogram",
        "inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        (),
        ITL_BUCKETS,
    ),
    (
        "tpot",
        "histogram",
        "request_time_per_output_token_seconds",
        "Histogram of time_per_output_token_seconds per request.",
        (),
        ITL_BUCKETS,
    ),
    (
        "e2e",
        "histogram",
        "e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        (),
        LATENCY_BUCKETS,
    ),
    (
        "queue",
        "histogram",
        "request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        (),
        LATENCY_BUCKETS,
    ),
    (
        "inference",
        "histogram",
        "request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        (),
        LATENCY_BUCKETS,
    ),
    (
        "prefill",
        "histogram",
        "request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        (),
        LATENCY_BUCKETS,
    ),
    (
        "decode",
        "histogram",
        "request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        (),
        LATENCY_BUCKETS,
    ),
    (
        "req_preemptions",
        "histogram",
        "request_num_preemptions",
        "Histogram of the number of times a request was preempted.",
        (),
        PREEMPTION_BUCKETS,
    ),
    (
        "prefill_kv_computed",
        "histogram",
        "request_prefill_kv_computed_tokens",
        "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        (),
        LEN,
    ),
)
V1_SPEC = (
    (
        "spec_drafts",
        "counter",
        "spec_decode_num_drafts",
        "Number of spec decoding drafts.",
        (),
        None,
    ),
    (
        "spec_draft_tokens",
        "counter",
        "spec_decode_num_draft_tokens",
        "Number of draft tokens.",
        (),
        None,
    ),
    (
        "spec_accepted",
        "counter",
        "spec_decode_num_accepted_tokens",
        "Number of accepted tokens.",
        (),
        None,
    ),
    (
        "spec_accepted_per_pos",
        "counter",
        "spec_decode_num_accepted_tokens_per_pos",
        "Accepted tokens per draft position.",
        ("position",),
        None,
    ),
)
V0 = (
    (
        "running",
        "gauge",
        "num_requests_running",
        "Number of requests currently running on GPU.",
        (),
        None,
    ),
    (
        "waiting",
        "gauge",
        "num_requests_waiting",
        "Number of requests waiting to be processed.",
        (),
        None,
    ),
    ("swapped", "gauge", "num_requests_swapped", "Number of requests swapped to CPU.", (), None),
    (
        "kv_usage",
        "gauge",
        "gpu_cache_usage_perc",
        "GPU KV-cache usage. 1 means 100 percent usage.",
        (),
        None,
    ),
    (
        "cpu_kv_usage",
        "gauge",
        "cpu_cache_usage_perc",
        "CPU KV-cache usage. 1 means 100 percent usage.",
        (),
        None,
    ),
    (
        "cpu_prefix_hit_rate",
        "gauge",
        "cpu_prefix_cache_hit_rate",
        "CPU prefix cache block hit rate.",
        (),
        None,
    ),
    (
        "prefix_hit_rate",
        "gauge",
        "gpu_prefix_cache_hit_rate",
        "GPU prefix cache block hit rate.",
        (),
        None,
    ),
    (
        "preemptions",
        "counter",
        "num_preemptions",
        "Cumulative number of preemption from the engine.",
        (),
        None,
    ),
    ("prompt_tokens", "counter", "prompt_tokens", "Number of prefill tokens processed.", (), None),
    (
        "generation_tokens",
        "counter",
        "generation_tokens",
        "Number of generation tokens processed.",
        (),
        None,
    ),
    (
        "iteration_tokens",
        "histogram",
        "iteration_tokens_total",
        "Histogram of number of tokens per engine_step.",
        (),
        V0_ITERATION,
    ),
    (
        "ttft",
        "histogram",
        "time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        (),
        V0_TTFT,
    ),
    (
        "tpot_v0",
        "histogram",
        "time_per_output_token_seconds",
        "Histogram of time per output token in seconds.",
        (),
        V0_TPOT,
    ),
    (
        "e2e",
        "histogram",
        "e2e_request_latency_seconds",
        "Histogram of end to end request latency in seconds.",
        (),
        V0_LATENCY,
    ),
    (
        "queue",
        "histogram",
        "request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        (),
        V0_LATENCY,
    ),
    (
        "inference",
        "histogram",
        "request_inference_time_seconds",
        "Histogram of time spent in RUNNING phase for request.",
        (),
        V0_LATENCY,
    ),
    (
        "prefill",
        "histogram",
        "request_prefill_time_seconds",
        "Histogram of time spent in PREFILL phase for request.",
        (),
        V0_LATENCY,
    ),
    (
        "decode",
        "histogram",
        "request_decode_time_seconds",
        "Histogram of time spent in DECODE phase for request.",
        (),
        V0_LATENCY,
    ),
    (
        "req_prompt_tokens",
        "histogram",
        "request_prompt_tokens",
        "Number of prefill tokens processed.",
        (),
        LEN,
    ),
    (
        "req_generation_tokens",
        "histogram",
        "request_generation_tokens",
        "Number of generation tokens processed.",
        (),
        LEN,
    ),
    (
        "req_max_gen_tokens",
        "histogram",
        "request_max_num_generation_tokens",
        "Histogram of maximum number of requested generation tokens.",
        (),
        LEN,
    ),
    (
        "req_n",
        "histogram",
        "request_params_n",
        "Histogram of the n request parameter.",
        (),
        N_BUCKETS,
    ),
    (
        "req_max_tokens",
        "histogram",
        "request_params_max_tokens",
        "Histogram of the max_tokens request parameter.",
        (),
        LEN,
    ),
    (
        "success",
        "counter",
        "request_success",
        "Count of successfully processed requests.",
        ("finished_reason",),
        None,
    ),
)
V0_SPEC = (
    (
        "spec_rate_v0",
        "gauge",
        "spec_decode_draft_acceptance_rate",
        "Speulative token acceptance rate.",
        (),
        None,
    ),
    (
        "spec_efficiency_v0",
        "gauge",
        "spec_decode_efficiency",
        "Speculative decoding system efficiency.",
        (),
        None,
    ),
    (
        "spec_accepted",
        "counter",
        "spec_decode_num_accepted_tokens",
        "Number of accepted tokens.",
        (),
        None,
    ),
    (
        "spec_draft_tokens",
        "counter",
        "spec_decode_num_draft_tokens",
        "Number of draft tokens.",
        (),
        None,
    ),
    (
        "spec_emitted_v0",
        "counter",
        "spec_decode_num_emitted_tokens",
        "Number of emitted tokens.",
        (),
        None,
    ),
)
LABEL_VALUES = {
    "reason": ("capacity", "deferred"),
    "sleep_state": ("awake", "weights_offloaded", "discard_all"),
    "source": ("local_compute", "local_cache_hit", "external_kv_transfer"),
    "finished_reason": ("stop", "length", "abort", "error", "repetition"),
    "transfer_type": connector_schema.TRANSFER_TYPES,
}
KV_RESIDENCY_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    5,
    10,
    20,
    30,
    60,
    120,
    300,
    600,
    1200,
    1800,
)
_SAMPLED = "Sampled metrics (controlled by --kv-cache-metrics-sample)."
V1_KV_RESIDENCY = (
    (
        "kv_block_lifetime",
        "histogram",
        "kv_block_lifetime_seconds",
        f"Histogram of KV cache block lifetime from allocation to eviction. {_SAMPLED}",
        (),
        KV_RESIDENCY_BUCKETS,
    ),
    (
        "kv_block_idle",
        "histogram",
        "kv_block_idle_before_evict_seconds",
        f"Histogram of idle time before KV cache block eviction. {_SAMPLED}",
        (),
        KV_RESIDENCY_BUCKETS,
    ),
    (
        "kv_block_reuse_gap",
        "histogram",
        "kv_block_reuse_gap_seconds",
        "Histogram of time gaps between consecutive KV cache block accesses. Only the most "
        f"recent accesses are recorded (ring buffer). {_SAMPLED}",
        (),
        KV_RESIDENCY_BUCKETS,
    ),
)
V1_CORRUPTED = (
    (
        "corrupted",
        "counter",
        "corrupted_requests",
        "Corrupted requests, in terms of total number of requests with NaNs in logits.",
        (),
        None,
    ),
)
CACHED_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
V0_FINISHED = ("stop", "length", "abort")


def families(
    schema: str,
    spec: bool,
    kv_metrics: bool = False,
    nans: bool = False,
    offload: bool = False,
    nixl: bool = False,
) -> tuple:
    if schema == "v1":
        rows: tuple[connector_schema.Row, ...] = V1 + (V1_SPEC if spec else ())
        rows += (V1_KV_RESIDENCY if kv_metrics else ()) + (V1_CORRUPTED if nans else ())
        rows += connector_schema.OFFLOAD if offload else ()
        rows += connector_schema.NIXL if nixl else ()
    else:
        rows = V0 + (V0_SPEC if spec else ())
    return tuple((c, kind, _P + name, help_, labels, b) for c, kind, name, help_, labels, b in rows)


# prometheus-fastapi-instrumentator, as vLLM's API server sets it up (status codes grouped).
HTTP_HIGHR_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    1.5,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
HTTP_BUCKETS = (0.1, 0.5, 1.0)
_NO_PCT = "Only value of header is respected. Otherwise ignored. No percentile calculated. "
HTTP_HELP = {
    "requests": "Total number of requests by method, status and handler.",
    "request_size": f"Content length of incoming requests by handler. {_NO_PCT}",
    "response_size": f"Content length of outgoing responses by handler. {_NO_PCT}",
    "highr": "Latency with many buckets but no API specific labels. Made for more accurate "
    "percentile calculations. ",
    "duration": "Latency with only few buckets by handler. Made to be only used if aggregation "
    "by handler is important. ",
}
HTTP_EXCLUDED = ("/metrics", "/health", "/load", "/ping", "/version", "/server_info")
