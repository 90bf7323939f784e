"""`infmon scrape`: one canonical snapshot of a server's metrics (or two, for rates).

Exit status: 0 a snapshot was printed; 1 the server has no ``/metrics`` ("no server metrics",
with ``--json`` a snapshot whose ``state`` is ``no_metrics``); 2 the scrape failed or an
operator error (one line on stderr; with ``--json`` a snapshot with ``state`` ``down`` and the
error is printed too). ``--json`` output is always valid JSON: unknown values are ``null``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from infmon.clock import MonotonicClock
from infmon.commands import CliError
from infmon.commands.common import say
from infmon.commands.load_args import (
    add_metrics_bounds_arguments,
    add_tls_arguments,
    config_from_args,
)
from infmon.config import Config
from infmon.model.base.sanitize import strict_json
from infmon.model.server.snapshot import ServerSnapshot, SourceState, unavailable
from infmon.report.fmt import DASH, count, pct, rate, seconds
from infmon.sources.backends import BACKENDS, UnknownBackendError, forced_mismatch, table_named
from infmon.sources.canonical import snapshot_from
from infmon.sources.detail import with_mfu
from infmon.sources.errors import SourceError
from infmon.sources.exposition import ExpositionError, parse_exposition
from infmon.sources.promql import PrometheusSource
from infmon.sources.readings import read_page
from infmon.sources.scraper import DirectSource, ScrapeLimits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="*",
        metavar="URL|FILE",
        help="a server URL (its /metrics), or one or two saved pages (A.prom B.prom)",
    )
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON")
    parser.add_argument("--prometheus", metavar="URL", help="read through a Prometheus server")
    parser.add_argument(
        "--selector",
        default="",
        metavar="S",
        help='label selector for --prometheus, e.g. {namespace="llm"}',
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds between scrapes (or between two saved pages)",
    )
    parser.add_argument("--count", type=int, default=None, help="scrapes to take (default 1)")
    parser.add_argument(
        "--backend", choices=sorted(BACKENDS), default=None, help="override backend autodetection"
    )
    g = parser.add_argument_group("bounds and TLS")
    add_metrics_bounds_arguments(g)
    add_tls_arguments(g)


def _from_files(
    paths: list[Path], args: argparse.Namespace, config: Config
) -> tuple[ServerSnapshot, str | None]:
    table = table_named(args.backend) if args.backend else None
    limits = ScrapeLimits.from_config(config)
    readings = []
    for p in paths:
        try:
            if p.stat().st_size > limits.max_bytes:
                raise CliError(f"{p}: larger than --metrics-max-bytes ({limits.max_bytes:,} bytes)")
            readings.append(read_page(parse_exposition(p.read_bytes(), limits.max_series), table))
        except ExpositionError as exc:
            raise CliError(f"{p}: {exc}") from None
        except OSError as exc:
            raise CliError(f"cannot read {p}: {exc.strerror or exc.__class__.__name__}") from None
    detected = readings[-1].detected
    if len(readings) == 1:
        return snapshot_from(readings[0], timestamp_s=0.0), detected
    if args.interval is None:
        raise CliError("two saved pages need --interval SECONDS (the time between them)")
    snap = snapshot_from(
        readings[1], readings[0], timestamp_s=args.interval, window_s=args.interval
    )
    return snap, detected


async def _poll(
    source: DirectSource | PrometheusSource, count: int, interval_s: float
) -> ServerSnapshot:
    clock = MonotonicClock()
    try:
        snap = await source.snapshot(clock.now())
        for _ in range(count - 1):
            await asyncio.sleep(interval_s)
            snap = await source.snapshot(clock.now())
        return snap
    finally:
        await source.aclose()


def _text(v: object) -> str:
    return DASH if v is None else str(v)


def _detail_line(snap: ServerSnapshot) -> str | None:
    """vLLM's 2025–26 families in one line (``--json`` has them all), None without them."""
    d = snap.detail
    parts = []
    if d.waiting_by_reason:
        parts.append(
            "waiting " + ", ".join(f"{k} {count(v)}" for k, v in d.waiting_by_reason.items())
        )
    if (share := d.source_share("local_cache_hit")) is not None:
        parts.append(f"prompt from cache {pct(share)}")
    if d.admission_rejections_total:
        parts.append(f"rejected {count(sum(d.admission_rejections_total.values()))}")
    if d.sleep_state is not None:
        parts.append(f"engine {d.sleep_state}")
    if d.kv_offload is not None:
        parts.append(f"kv offload loading {pct(d.kv_offload.load_time_fraction)}")
    if d.lora is not None:
        parts.append(f"lora {len(d.lora.running)} running {len(d.lora.waiting)} waiting")
    if d.pd_transfer is not None and d.pd_transfer.transfers:
        parts.append(f"p/d pulls {count(d.pd_transfer.transfers)}")
    if d.estimates is not None and d.estimates.mfu is not None:
        parts.append(f"mfu {pct(d.estimates.mfu)}")
    return " · ".join(parts) if parts else None


FAR_ABOVE_MEAN = 2.0
"""A histogram's p50 this many times its mean is said to be the buckets', not the data's."""


def _p50_caveats(snap: ServerSnapshot) -> list[str]:
    """A p50 far above the mean: the p50 is interpolated inside a bucket (PromQL's
    ``histogram_quantile``: the middle of the bucket for half the observations), the mean
    (sum / count) is exact; the line names the bucket so the reader sees why."""
    out = []
    for name, st in snap.latency_s.items():
        if st.p50 is None or st.mean is None or not st.p50 > FAR_ABOVE_MEAN * st.mean:
            continue
        where = (
            f" inside the bucket {seconds(st.p50_low)}–{seconds(st.p50_high)}"
            if st.p50_low is not None and st.p50_high is not None
            else " inside a bucket"
        )
        out.append(
            f"  caveat: {name} p50 {seconds(st.p50)} is interpolated{where}; the observations "
            f"sit lower: their mean is {seconds(st.mean)} (exact, sum/count)"
        )
    return out


def render_text(snap: ServerSnapshot) -> str:
    """A compact human view of a snapshot (``--json`` has everything): counts with thousands
    separators, fractions as percentages, latencies in ms or s (``infmon.report.fmt``)."""
    lines = [
        f"backend {_text(snap.backend)} {_text(snap.backend_version)} · models "
        f"{', '.join(snap.models) or DASH} · state {snap.state}",
        f"running {count(snap.running)}  waiting {count(snap.waiting)}  "
        f"kv {pct(snap.kv_cache_usage)}  prefix hits {pct(snap.prefix_cache_hit_rate)}  "
        f"preemptions {count(snap.preemptions_total)}",
        f"tokens prompt {count(snap.prompt_tokens_total)} ({rate(snap.prompt_tokens_per_s)}/s)  "
        f"generation {count(snap.generation_tokens_total)} "
        f"({rate(snap.generation_tokens_per_s)}/s)",
        f"kv capacity {count(snap.kv_capacity_tokens)} tokens · max_model_len "
        f"{count(snap.max_model_len)}",
    ]
    for name, st in snap.latency_s.items():
        lines.append(
            f"{name:>8}  n {count(st.count)}  mean {seconds(st.mean)}  p50 {seconds(st.p50)}  "
            f"p90 {seconds(st.p90)}  p99 {seconds(st.p99)}"
        )
    lines += _p50_caveats(snap)
    if snap.api_server_cpu_s_total is not None:  # the process that answered: its CPU so far
        cores = snap.api_server_cpu_cores
        now = DASH if cores is None else f"{cores:.2f} cores over the window"
        lines.append(f"API server CPU {snap.api_server_cpu_s_total:,.1f} s ({now})")
    if snap.spec_decode:
        sd = snap.spec_decode
        length = DASH if sd.mean_acceptance_length is None else f"{sd.mean_acceptance_length:.2f}"
        lines.append(f"spec decode acceptance {pct(sd.acceptance_rate)}  mean length {length}")
    if (detail := _detail_line(snap)) is not None:
        lines.append(detail)
    for e in snap.engines:
        lines.append(
            f"  [{e.key}] running {count(e.running)} waiting {count(e.waiting)} "
            f"kv {pct(e.kv_cache_usage)} gen {count(e.generation_tokens_total)}"
            + (f" gpus {', '.join(e.gpus)}" if e.gpus else "")
        )
    for g in snap.gpus:
        holders = ", ".join(p.name for p in g.processes)
        name = g.name or DASH
        lines.append(
            f"  gpu {g.hostname or ''}/{g.index} {name} activity {pct(g.activity)} "
            f"mem {count(g.mem_used_mib)}/{count(g.mem_total_mib)} MiB power {count(g.power_w)} W"
            + (f" held by {holders}" if holders else "")
        )
    if snap.error_message:
        lines.append(f"error ({snap.error_kind}): {snap.error_message}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        snap, detected = _snapshot(args, config)
        snap = with_mfu(snap, config.gpu_peak_tflops)
    except UnknownBackendError as exc:
        raise CliError(str(exc)) from None
    except SourceError as exc:
        no_metrics = exc.kind == SourceError.NO_METRICS
        if args.json:
            state = SourceState.NO_METRICS if no_metrics else SourceState.DOWN
            say(strict_json(unavailable(0.0, state, exc.kind, exc.message), indent=2))
        if no_metrics:
            if not args.json:
                say("no server metrics (the server has no /metrics endpoint)")
            return 1
        raise CliError(exc.message) from None
    if warning := forced_mismatch(args.backend, detected):
        say(f"infmon: {warning}", err=True)
    say(strict_json(snap, indent=2) if args.json else render_text(snap))
    return 0


def server_url(url: str) -> str:
    """The server's base URL from what an operator pastes: ``URL/v1`` (the OpenAI base URL,
    which bench accepts) is the server at ``URL``; its metrics are at ``URL/metrics``."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else url


def _snapshot(args: argparse.Namespace, config: Config) -> tuple[ServerSnapshot, str | None]:
    """The snapshot, and the backend the page's own names point to (None: not known)."""
    count = args.count if args.count is not None else (2 if args.interval else 1)
    interval = args.interval if args.interval is not None else 1.0
    if args.prometheus:
        src = PrometheusSource(
            args.prometheus,
            args.selector,
            backend=args.backend,
            window_s=args.interval,
            timeout_s=config.metrics_timeout_s,
            max_bytes=config.metrics_max_bytes,
            max_series=config.metrics_max_series,
            ca_bundle=config.ca_bundle,
            insecure=config.insecure,
        )
        return asyncio.run(_poll(src, 1, interval)), None
    if not args.targets:
        raise CliError("give a URL, one or two saved pages, or --prometheus URL")
    if all(not t.startswith(("http://", "https://")) for t in args.targets):
        if len(args.targets) > 2:
            raise CliError("give at most two saved pages")
        return _from_files([Path(t) for t in args.targets], args, config)
    if len(args.targets) != 1:
        raise CliError("give one server URL")
    source = DirectSource.from_config(config, server_url(args.targets[0]), backend=args.backend)
    return asyncio.run(_poll(source, count, interval)), source.detected
