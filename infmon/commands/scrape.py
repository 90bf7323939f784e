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
from infmon.commands.common import (
    add_metrics_bounds_arguments,
    add_tls_arguments,
    config_from_args,
    say,
)
from infmon.config import Config
from infmon.model.sanitize import strict_json
from infmon.model.server import ServerSnapshot, SourceState, unavailable
from infmon.sources.backends import BACKENDS, UnknownBackendError, table_named
from infmon.sources.canonical import read_page, snapshot_from
from infmon.sources.errors import SourceError
from infmon.sources.exposition import ExpositionError, parse_exposition
from infmon.sources.promql import PrometheusSource
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


def _from_files(paths: list[Path], args: argparse.Namespace, config: Config) -> ServerSnapshot:
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
    if len(readings) == 1:
        return snapshot_from(readings[0], timestamp_s=0.0)
    if args.interval is None:
        raise CliError("two saved pages need --interval SECONDS (the time between them)")
    return snapshot_from(
        readings[1], readings[0], timestamp_s=args.interval, window_s=args.interval
    )


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


def _fmt(v: object) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def render_text(snap: ServerSnapshot) -> str:
    """A compact human view of a snapshot (``--json`` has everything)."""
    lines = [
        f"backend {_fmt(snap.backend)} {_fmt(snap.backend_version)} · models "
        f"{', '.join(snap.models) or '—'} · state {snap.state}",
        f"running {_fmt(snap.running)}  waiting {_fmt(snap.waiting)}  "
        f"kv {_fmt(snap.kv_cache_usage)}  prefix hits {_fmt(snap.prefix_cache_hit_rate)}  "
        f"preemptions {_fmt(snap.preemptions_total)}",
        f"tokens prompt {_fmt(snap.prompt_tokens_total)} ({_fmt(snap.prompt_tokens_per_s)}/s)  "
        f"generation {_fmt(snap.generation_tokens_total)} ({_fmt(snap.generation_tokens_per_s)}/s)",
        f"kv capacity {_fmt(snap.kv_capacity_tokens)} tokens · max_model_len "
        f"{_fmt(snap.max_model_len)}",
    ]
    for name, st in snap.latency_s.items():
        lines.append(
            f"{name:>8}  n {_fmt(st.count)}  mean {_fmt(st.mean)}  p50 {_fmt(st.p50)}  "
            f"p90 {_fmt(st.p90)}  p99 {_fmt(st.p99)}  s"
        )
    if snap.spec_decode:
        sd = snap.spec_decode
        lines.append(
            f"spec decode acceptance {_fmt(sd.acceptance_rate)}  mean length "
            f"{_fmt(sd.mean_acceptance_length)}"
        )
    for e in snap.engines:
        lines.append(
            f"  [{e.key}] running {_fmt(e.running)} waiting {_fmt(e.waiting)} "
            f"kv {_fmt(e.kv_cache_usage)} gen {_fmt(e.generation_tokens_total)}"
            + (f" gpus {', '.join(e.gpus)}" if e.gpus else "")
        )
    for g in snap.gpus:
        holders = ", ".join(p.name for p in g.processes)
        lines.append(
            f"  gpu {g.hostname or ''}/{g.index} {_fmt(g.name)} activity {_fmt(g.activity)} "
            f"mem {_fmt(g.mem_used_mib)}/{_fmt(g.mem_total_mib)} MiB power {_fmt(g.power_w)} W"
            + (f" held by {holders}" if holders else "")
        )
    if snap.error_message:
        lines.append(f"error ({snap.error_kind}): {snap.error_message}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    try:
        snap = _snapshot(args, config)
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
    say(strict_json(snap, indent=2) if args.json else render_text(snap))
    return 0


def _snapshot(args: argparse.Namespace, config: Config) -> ServerSnapshot:
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
        return asyncio.run(_poll(src, 1, interval))
    if not args.targets:
        raise CliError("give a URL, one or two saved pages, or --prometheus URL")
    if all(not t.startswith(("http://", "https://")) for t in args.targets):
        if len(args.targets) > 2:
            raise CliError("give at most two saved pages")
        return _from_files([Path(t) for t in args.targets], args, config)
    if len(args.targets) != 1:
        raise CliError("give one server URL")
    source = DirectSource.from_config(config, args.targets[0], backend=args.backend)
    return asyncio.run(_poll(source, count, interval))
