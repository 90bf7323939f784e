"""The options shared by every command that talks to a server (monitor, bench, method, demo,
quality, scrape), and the ``Config`` they build.

Every option defaults to ``None`` here so that ``infmon.config.build_config`` can tell
"not given on the command line" from a value, and apply CLI > env > file > defaults: every
subcommand builds its client from the same ``Config`` (``INFMON_*``, config file, key file).
"""

from __future__ import annotations

import argparse
from typing import Any

from infmon.commands import CliError
from infmon.commands.common import hide_api_key_from_process_title, say
from infmon.config import Config, build_config
from infmon.config_values import ConfigError

_LOAD_KEYS = (
    "url",
    "api_key",
    "api_key_file",
    "model",
    "endpoint",
    "prompt_tokens",
    "output_tokens",
    "lockstep",
    "dataset",
    "workload",
    "shared_prefix_tokens",
    "prefix_groups",
    "turns",
    "think_time",
    "trace",
    "time_scale",
    "schedule",
    "seed",
    "slo",
    "session_dir",
    "label",
    "concurrency",
    "rate",
    "max_concurrency",
    "arrival",
    "step_duration",
    "step_requests",
    "warmup",
    "ignore_eos",
    "per_request_metrics",
    "load_priority",
    "connect_timeout",
    "read_timeout",
    "stall_timeout",
    "ca_bundle",
    "insecure",
    "max_event_bytes",
    "metrics_timeout",
    "metrics_max_bytes",
    "metrics_max_series",
    "gpu_peak_tflops",
)


def add_tls_arguments(g: argparse._ActionsContainer) -> None:
    """``--ca-bundle``, ``--insecure`` and ``--config``: every command that opens a connection."""
    g.add_argument("--ca-bundle", metavar="FILE", help="CA bundle for TLS verification")
    g.add_argument(
        "--insecure",
        action="store_true",
        default=None,
        help="do not verify TLS certificates (warns)",
    )
    g.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (default $XDG_CONFIG_HOME/infmon/config.toml)",
    )


def add_metrics_bounds_arguments(g: argparse._ActionsContainer) -> None:
    """The bounds of one ``/metrics`` (or Prometheus) read."""
    g.add_argument(
        "--metrics-timeout",
        metavar="DUR",
        help="total deadline of one /metrics read (default 5s)",
    )
    g.add_argument(
        "--metrics-max-bytes",
        metavar="SIZE",
        help="largest /metrics page read, e.g. 16MB (default 16MB; larger: too_large)",
    )
    g.add_argument(
        "--metrics-max-series",
        metavar="N",
        help="pages with more series are rejected (default 100000)",
    )
    g.add_argument(
        "--gpu-peak-tflops",
        metavar="TFLOPS",
        help="one GPU's dense BF16 peak, for MFU (default: from the GPU telemetry's GPU name)",
    )


def add_gpu_arguments(g: argparse._ActionsContainer) -> None:
    """Where the GPUs' telemetry comes from (the GPU pane, the journal, the report)."""
    g.add_argument(
        "--gpu-metrics",
        metavar="URL|nvml",
        help="GPU telemetry: a DCGM exporter's URL (its /metrics), or nvml for this host's "
        "GPUs (needs nvidia-ml-py); default: DCGM series on the server's own page, if any",
    )


def add_server_arguments(g: argparse._ActionsContainer, *, endpoint_default: str) -> None:
    """Key, model, endpoint, timeouts, TLS and the SSE event cap (every command that sends
    requests); the command adds its own positional URL."""
    g.add_argument(
        "--api-key",
        help="API key (default: $INFMON_API_KEY, then $OPENAI_API_KEY); prefer the environment "
        "or --api-key-file: a command line is visible to every user of the machine",
    )
    g.add_argument("--api-key-file", metavar="FILE", help="read the API key from FILE")
    g.add_argument("--model", help="model name (default: the first model of /v1/models)")
    g.add_argument(
        "--endpoint", choices=("completions", "chat"), help=f"API (default {endpoint_default})"
    )
    g.add_argument("--connect-timeout", metavar="DUR", help="TCP/TLS connect timeout (default 10s)")
    g.add_argument(
        "--read-timeout",
        metavar="DUR",
        help="longest stall between two reads of a stream (default 600s; no total timeout)",
    )
    g.add_argument(
        "--stall-timeout",
        metavar="DUR",
        help="cut a stream with no new token for this long, as `stalled` (default 30s; 0: never)",
    )
    g.add_argument(
        "--max-event-bytes",
        metavar="SIZE",
        help="cap on one SSE event of a stream (default 1MB; larger: oversized_event)",
    )
    add_tls_arguments(g)


def add_load_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the common load options (the command adds its own positional URL)."""
    g = parser.add_argument_group("server and load")
    add_server_arguments(g, endpoint_default="completions")
    add_metrics_bounds_arguments(g)
    add_gpu_arguments(g)
    lengths = "N, A-B, normal:MEAN,SD, lognormal:MEDIAN,SIGMA or empirical:FILE"
    g.add_argument(
        "--prompt-tokens",
        metavar="DIST",
        help=f"prompt length as the server counts it, shared prefix included ({lengths}; "
        "default 128)",
    )
    g.add_argument(
        "--output-tokens",
        metavar="DIST",
        help=f"output length ({lengths}; default 128 varied by ±10%%)",
    )
    g.add_argument(
        "--lockstep",
        action="store_true",
        default=None,
        help="default output length exactly 128 (streams may finish in waves)",
    )
    g.add_argument(
        "--workload",
        metavar="KIND",
        help="corpus (real text and tasks, default), synthetic (random words) or a dataset FILE",
    )
    g.add_argument("--dataset", metavar="FILE", help="same as --workload FILE")
    g.add_argument(
        "--shared-prefix-tokens",
        metavar="N",
        help="a system prompt of N tokens shared within each prefix group (default 0)",
    )
    g.add_argument("--prefix-groups", metavar="G", help="groups sharing a prefix (default 1)")
    g.add_argument(
        "--turns",
        metavar="K",
        help="user turns per conversation; each turn carries the previous answers (default 1)",
    )
    g.add_argument("--think-time", metavar="DUR", help="pause before each later turn (default 0)")
    g.add_argument(
        "--trace",
        metavar="FILE",
        help="replay arrivals and lengths: Mooncake JSONL, Azure LLM trace CSV or BurstGPT CSV",
    )
    g.add_argument(
        "--time-scale", metavar="X", help="multiply a trace's times by X (0.5: twice as fast)"
    )
    g.add_argument(
        "--schedule",
        metavar="SPEC",
        help="open-loop arrivals, e.g. ramp:1-20/60s, burst:50@10s, rate:5/30s, joined with +",
    )
    g.add_argument(
        "--seed", help="repeat a run's prompts, lengths and arrivals (default: new each run)"
    )
    g.add_argument(
        "--slo", metavar="SPEC", help="e.g. ttft=500ms,tpot=50ms,e2el=10s (goodput, SLO limit)"
    )
    g.add_argument(
        "--session-dir",
        metavar="DIR",
        help="session record (default ./infmon-sessions/<UTC time>-<label>/)",
    )
    g.add_argument(
        "--label",
        help="name of this run in reports and comparisons (default: the session directory's name)",
    )
    g.add_argument(
        "--concurrency", metavar="N[,N…]", help="closed loop: concurrent streams per step"
    )
    g.add_argument("--rate", metavar="R[,R…]", help="open loop: requests/s per step")
    g.add_argument(
        "--max-concurrency",
        metavar="N",
        help="cap on in-flight requests in rate mode (default 256)",
    )
    g.add_argument(
        "--arrival", choices=("poisson", "gamma"), help="open-loop arrivals (default poisson)"
    )
    g.add_argument(
        "--step-duration", metavar="DUR", help="measured time per step, e.g. 20s (default 20s)"
    )
    g.add_argument(
        "--step-requests",
        metavar="N",
        help="send at most N measured requests per step (as vllm bench serve --num-prompts)",
    )
    g.add_argument(
        "--warmup", metavar="DUR", help="warm-up per step, excluded (default 10%% of the step)"
    )
    g.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="pin output length with ignore_eos/min_tokens where the server accepts them (default on)",
    )
    g.add_argument(
        "--per-request-metrics",
        action="store_true",
        default=None,
        help="require the server's own per-request timings on every response (vLLM: start it "
        "with --enable-per-request-metrics; its API has no per-request switch)",
    )
    g.add_argument(
        "--load-priority",
        choices=("realtime", "high", "normal"),
        default=None,
        help="the load worker's thread: realtime (default: SCHED_RR 1 where root, "
        "CAP_SYS_NICE or `ulimit -r 1` allow, so a busy host cannot delay its reads; a high fair "
        "share if real time starves the host), high (nice -20 in the fair class, its scheduling "
        "group too: never starves the host, reads a wake-up later) or normal",
    )


def cli_layer(args: argparse.Namespace) -> dict[str, Any]:
    """The options the operator actually gave, as config keys."""
    values = vars(args)
    layer = {key: values.get(key) for key in _LOAD_KEYS if values.get(key) is not None}
    if values.get("config"):
        layer["config"] = values["config"]
    return layer


def config_from_args(args: argparse.Namespace, defaults: dict[str, Any] | None = None) -> Config:
    """Build the frozen Config (CLI > env > file > ``defaults`` > built-in); operator errors
    become CliError. The process title loses any ``--api-key`` value first."""
    hide_api_key_from_process_title()
    try:
        config = build_config(cli_layer(args), defaults=defaults)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if config.insecure:
        say(
            "infmon: warning: TLS certificate verification is OFF (--insecure): the server is not "
            "authenticated and the API key can be intercepted",
            err=True,
        )
    return config
