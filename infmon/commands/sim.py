"""`infmon sim`: run the vLLM simulator (OpenAI API + /metrics) on loopback."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any

from infmon.commands import CliError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from infmon.sim.faults import HELP as FAULT_HELP

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = FAULT_HELP
    a = parser.add_argument
    a("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    a("--port", type=int, default=8000, help="port (0 = a free port; the real one is printed)")
    a("--scenario", default="baseline", help="named scenario (see --list)")
    a("--list", action="store_true", help="list the scenarios and exit")
    a("--gpu", "--gpu-profile", dest="gpu", help="GPU profile: a built-in name or a TOML file")
    a("--model", "--model-profile", dest="model", help="model profile: a name or a TOML file")
    a("--engine-profile", help="vLLM generation's host costs: vllm-v1 (default) or a TOML file")
    a("--served-model-name", help="the model name the API answers to (default: --model)")
    a("--max-model-len", type=int)
    a("--max-num-seqs", type=int)
    a("--max-num-batched-tokens", type=int)
    a("--gpu-memory-utilization", type=float)
    a("--block-size", type=int)
    a("--no-prefix-caching", action="store_true", help="disable prefix caching")
    a("--draft-model", help="drafter model profile (name or TOML) for speculative decoding")
    a(
        "--spec-method",
        choices=("draft_model", "eagle", "ngram"),
        help="proposer (default: from the drafter's profile; ngram without one)",
    )
    a("--speculative-k", type=int, help="draft tokens per step (0 disables)")
    a(
        "--acceptance",
        type=float,
        nargs="+",
        metavar="P",
        help="mean acceptance per draft position, each given the previous was accepted (one "
        "value: later positions decay by 0.85 each); each request draws its own around it",
    )
    a("--contention", type=float, help="noisy neighbour: every step takes (1 + F) times longer")
    a("--quality-error-rate", type=float, help="share of quality probes answered wrongly")
    a("--metrics-schema", choices=("v1", "v0"), default="v1", help="vLLM metric names (v0: older)")
    a("--seed", type=int, default=0)
    a(
        "--fault",
        action="append",
        default=[],
        metavar="KIND[:VALUE][:RATE]",
        help="inject a fault (repeatable; see the list below)",
    )
    a(
        "--enable-per-request-metrics",
        action="store_true",
        help="as vLLM: the engine's queue, prefill and decode times on each final usage chunk",
    )
    a(
        "--per-request-spec-decode-metrics",
        choices=("none", "summary", "detailed"),
        default="none",
        help="as vLLM: each request's acceptance figures (with speculative decoding)",
    )
    a("--trace-timing", metavar="FILE", help="append per-request chunk write times (JSONL)")
    a("--probes", metavar="FILE", help="quality probes JSONL to answer (default: infmon's own)")
    a("--kv-cache-metrics", action="store_true", help="serve vllm:kv_block_* (sampled, as vLLM)")
    a(
        "--compute-nans-in-logits",
        action="store_true",
        help="serve vllm:corrupted_requests (as VLLM_COMPUTE_NANS_IN_LOGITS=1)",
    )
    a("--firehose", action="store_true", help="no engine: stream pre-rendered chunks at once")
    k = parser.add_argument_group("KV connectors (vLLM's 2026 offload and P/D metrics)")
    k.add_argument(
        "--offload",
        action="store_true",
        help=f"offload KV to CPU memory ({DEFAULT_OFFLOAD_GIB:g} GiB unless --kv-offloading-size)",
    )
    k.add_argument(
        "--kv-offloading-size",
        type=float,
        metavar="GIB",
        help="as vLLM: host memory for offloaded KV blocks (implies --offload)",
    )
    k.add_argument(
        "--pd",
        action="store_true",
        help="disaggregated prefill/decode: a prefill pod (its own port) feeds the decode pod "
        "(--port, the API) over NIXL",
    )
    k.add_argument("--prefill-port", type=int, default=0, help="the prefill pod's port (0: free)")
    k.add_argument("--kv-link-gb-s", type=float, help="P/D link bandwidth, GB/s (default 25)")
    g = parser.add_argument_group("the virtual GPU (DCGM exporter series on /gpu-metrics)")
    g.add_argument("--dcgm-port", type=int, help="also serve them as /metrics on this port")
    g.add_argument("--pod", default="infmon-sim-0", help="the pod holding the GPU (label pod)")
    g.add_argument("--namespace", default="default", help="its namespace (label namespace)")
    g.add_argument("--gpu-hostname", default="infmon-sim", help="the exporter's Hostname label")
    p = parser.add_argument_group("what-if (--predict: no HTTP, virtual time)")
    p.add_argument("--predict", action="store_true", help="print what a bench of this load gets")
    p.add_argument("--concurrency", type=int, help="closed-loop users")
    p.add_argument("--rate", help="open-loop requests/s (Poisson) or inf (a burst)")
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--prompt-tokens", type=int, help="default 512 (--fitted: the fit's)")
    p.add_argument("--output-tokens", type=int, help="default 256 (--fitted: the fit's)")
    p.add_argument("--json", action="store_true", help="the prediction as JSON")
    p.add_argument(
        "--break-even",
        action="store_true",
        help="with --fitted and --speculative-k: the concurrency where spec stops paying",
    )
    from infmon.commands import simfit

    simfit.add_arguments(parser)


DEFAULT_OFFLOAD_GIB = 16.0


def _offload_gib(args: argparse.Namespace) -> float | None:
    if args.kv_offloading_size is not None:
        if args.kv_offloading_size <= 0:
            raise CliError("--kv-offloading-size must be positive (GiB)")
        return float(args.kv_offloading_size)
    return DEFAULT_OFFLOAD_GIB if args.offload else None


def _config(args: argparse.Namespace) -> tuple[Any, float]:
    from infmon.sim.profiles import ProfileError
    from infmon.sim.scenarios import SCENARIOS, build_config
    from infmon.sim.spec import SpecConfigError

    if args.scenario not in SCENARIOS:
        raise CliError(f"unknown scenario {args.scenario!r}; see `infmon sim --list`")
    sc = SCENARIOS[args.scenario]
    if args.draft_model and args.speculative_k is None and sc.speculative_k <= 0:
        raise CliError(
            "--draft-model needs --speculative-k N (vLLM: num_speculative_tokens was not provided)"
        )
    try:
        cfg = build_config(
            sc,
            gpu=args.gpu,
            model=args.model,
            engine=args.engine_profile,
            drafter=args.draft_model,
            spec_method=args.spec_method,
            speculative_k=args.speculative_k,
            acceptance=tuple(args.acceptance) if args.acceptance else None,
            gpu_memory_utilization=args.gpu_memory_utilization,
            max_model_len=args.max_model_len,
            max_num_seqs=args.max_num_seqs,
            contention=args.contention,
            max_num_batched_tokens=args.max_num_batched_tokens,
            block_size=args.block_size,
            served_model_name=args.served_model_name,
            seed=args.seed,
            enable_prefix_caching=False if args.no_prefix_caching else None,
            kv_cache_metrics=args.kv_cache_metrics or None,
            compute_nans_in_logits=args.compute_nans_in_logits or None,
            kv_offloading_gib=_offload_gib(args),
            pd=args.pd or None,
            pd_link_gb_s=args.kv_link_gb_s,
        )
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    except (ProfileError, SpecConfigError) as exc:
        raise CliError(str(exc)) from None
    error_rate = (
        sc.quality_error_rate if args.quality_error_rate is None else args.quality_error_rate
    )
    return cfg, error_rate


def _describe(cfg: Any, mem: Any) -> list[str]:
    from infmon.sim.roofline import predicted_decode_tok_s

    drafter = cfg.drafter.name if cfg.drafter is not None else "prompt lookup"
    spec = (
        f"{cfg.spec_method} ({drafter}) k={cfg.speculative_k} acceptance={list(cfg.acceptance)}"
        if cfg.spec_enabled
        else "off"
    )
    return [
        f"gpu: {cfg.gpu.name} ({cfg.gpu.memory_gib:g} GiB, {cfg.gpu.bandwidth_gb_s:g} GB/s); "
        f"engine profile {cfg.engine.name} (host costs fitted on vLLM {cfg.engine.vllm_version})",
        f"model: {cfg.model.name} ({cfg.model.dtype}), served as {cfg.served_model_name}",
        f"weights: {mem.weights_gib:.2f} GiB; drafter weights: {mem.drafter_weights_gib:.2f} GiB; "
        f"profiling peak {mem.activation_gib:.2f} GiB; non-torch {mem.non_torch_gib:.2f} GiB",
        f"kv cache: {mem.kv_gib:.2f} GiB = {mem.num_gpu_blocks} blocks x {mem.block_size} tokens "
        f"= {mem.kv_tokens} tokens ({mem.kv_bytes_per_token} B/token)",
        f"max_model_len {cfg.max_model_len}, max_num_seqs {cfg.max_num_seqs}, "
        f"max_num_batched_tokens {cfg.max_num_batched_tokens}, contention {cfg.contention:g}",
        f"speculative decoding: {spec}",
        f"predicted single-stream decode: {predicted_decode_tok_s(cfg):.1f} tokens/s",
    ]


def _predict(args: argparse.Namespace, cfg: Any) -> int:
    import json
    import math

    from infmon.sim.predict import LoadSpec, predict, render

    if (args.concurrency is None) == (args.rate is None):
        raise CliError("--predict needs one of --concurrency N or --rate R|inf")
    try:
        rate = None if args.rate is None else float(args.rate)
    except ValueError:
        raise CliError(f"--rate must be a number or inf, not {args.rate!r}") from None
    if rate is not None and not (rate > 0 or math.isinf(rate)):
        raise CliError("--rate must be positive")
    if args.prompt_tokens is None:
        args.prompt_tokens = 512
    if args.output_tokens is None:
        args.output_tokens = 256
    load = LoadSpec(
        args.requests, args.prompt_tokens, args.output_tokens, args.concurrency, rate, args.seed
    )
    if args.prompt_tokens + args.output_tokens > cfg.max_model_len:
        raise CliError(
            f"prompt + output tokens ({args.prompt_tokens + args.output_tokens}) exceed "
            f"max_model_len {cfg.max_model_len}"
        )
    pred = predict(cfg, load)
    if args.json:
        print(json.dumps(pred.to_json(), indent=2))
    else:
        for line in render(pred):
            print(line)
    return 0


def run(args: argparse.Namespace) -> int:
    from infmon.sim.faults import parse_fault
    from infmon.sim.memory import memory_budget
    from infmon.sim.scenarios import SCENARIOS

    if args.list:
        from infmon.sim import profiles

        for name, sc in SCENARIOS.items():
            print(f"{name:14} {sc.summary}")
        for kind, table in (
            ("gpus", profiles.GPUS),
            ("models", profiles.MODELS),
            ("engines", profiles.ENGINES),
        ):
            print(f"{kind}: {', '.join(table)}")
        return 0
    if args.firehose:
        return _firehose(args)
    if args.fit or (args.predict and args.fitted):
        from infmon.commands import simfit

        return simfit.run_fit(args) if args.fit else simfit.run_predict(args)
    cfg, error_rate = _config(args)
    mem = memory_budget(cfg)
    if mem.num_gpu_blocks == 0:
        raise CliError(
            f"{cfg.model.name} ({mem.weights_gib + mem.drafter_weights_gib:.1f} GiB of "
            f"weights) leaves no room for KV on {cfg.gpu.name} at "
            f"gpu_memory_utilization {cfg.gpu_memory_utilization:g}"
        )
    if mem.kv_tokens < cfg.max_model_len:
        raise CliError(
            f"KV cache holds {mem.kv_tokens} tokens, less than max_model_len "
            f"{cfg.max_model_len}: raise --gpu-memory-utilization or lower --max-model-len"
        )
    if args.predict:
        return _predict(args, cfg)
    try:
        faults = tuple(parse_fault(f) for f in args.fault)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    from infmon.sim.server import served_version

    print(f"infmon sim: scenario {args.scenario} · vLLM {served_version()} (as /version says)")
    for line in _describe(cfg, mem):
        print(f"  {line}")
    sys.stdout.flush()
    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(_serve(cfg, args, error_rate, faults))
    return 0


def _firehose(args: argparse.Namespace) -> int:
    from infmon.sim.firehose import serve_firehose

    with contextlib.suppress(ImportError):
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    name = args.served_model_name or args.model or "infmon-firehose"
    try:
        asyncio.run(serve_firehose(args.host, args.port, name))
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    return 0


async def _serve(cfg: Any, args: argparse.Namespace, error_rate: float, faults: tuple) -> None:
    from dataclasses import replace

    from infmon.sim.server import ServerOptions, SimServer
    from infmon.sim.text import PROBES_PATH, load_probes

    opts = ServerOptions(
        metrics_schema=args.metrics_schema,
        seed=args.seed,
        quality_error_rate=error_rate,
        faults=faults,
        trace_path=args.trace_timing,
        probes=load_probes(Path(args.probes) if args.probes else PROBES_PATH),
        pod=args.pod,
        namespace=args.namespace,
        hostname=args.gpu_hostname,
        dcgm_port=args.dcgm_port,
        per_request_metrics=args.enable_per_request_metrics,
        spec_decode_metrics=args.per_request_spec_decode_metrics,
    )
    server = SimServer(cfg, opts)
    host = f"[{args.host}]" if ":" in args.host else args.host
    try:
        if cfg.pd_role == "decode":
            server.prefill_pod = SimServer(
                replace(cfg, pd_role="prefill"), replace(opts, pod=f"{args.pod}-prefill")
            )
            prefill_port = await server.prefill_pod.start(args.host, args.prefill_port)
            print(f"infmon sim: prefill pod at http://{host}:{prefill_port}", flush=True)
        port = await server.start(args.host, args.port)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    print(f"infmon sim: listening on http://{host}:{port}", flush=True)
    if server.dcgm_port is not None:
        print(f"infmon sim: DCGM exporter on http://{host}:{server.dcgm_port}/metrics", flush=True)
    await stop.wait()
    await server.close()
    if server.prefill_pod is not None:
        await server.prefill_pod.close()
    print("infmon sim: stopped", flush=True)
