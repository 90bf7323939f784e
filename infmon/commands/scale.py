"""Options for load bigger than one process: workers, Ray, several endpoints, the exporter.

``--workers N|auto`` runs N local worker processes (``auto``: one per core but the
controller's); ``--ray ADDRESS`` runs them as Ray actors instead (``--workers`` then counts
actors; default one per CPU the cluster has). ``--url`` may be given more than once, or the
endpoints found in a Prometheus (``--urls-from-prometheus SELECTOR`` with ``--prometheus``);
requests spread ``--spread round-robin`` (default) or ``least-inflight``. ``--metrics-port``
exports infmon's own client figures for a Prometheus to scrape.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.config import Config, normalise_url
from infmon.config_values import ConfigError
from infmon.engine.ray_setup import PLACEMENTS
from infmon.engine.spread import ROUND_ROBIN, SPREADS

if TYPE_CHECKING:
    from infmon.engine.restart import Replacement


@dataclass(frozen=True, slots=True)
class ScaleOptions:
    workers: int | None = None
    """None: one (or, with Ray, one per CPU of the cluster)."""
    ray: str | None = None
    ray_token_file: Path | None = None
    ray_placement: str = "spread"
    ray_timeout_s: float = 30.0
    ray_restart: bool = False
    """A lost Ray actor is replaced by a new one (else its share stays with the others)."""
    urls: tuple[str, ...] = ()
    """Every endpoint, the first being the run's ``url``; () with one endpoint."""
    spread: str = ROUND_ROBIN
    prometheus: str | None = None
    selector: str | None = None
    metrics_addr: tuple[str, int] | None = None
    scrape_urls: tuple[str, ...] = ()
    """Servers read into the fleet view but sent no load (``--scrape-url``)."""


def auto_workers() -> int:
    """One worker per core this process may run on, less the controller's: at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def add_scale_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("scale: workers, endpoints, export")
    g.add_argument(
        "--workers",
        metavar="N|auto",
        help="load worker processes (default 1; auto: cores - 1); with --ray, Ray actors",
    )
    g.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the workers as Ray actors: auto, ray://head:10001, or local (a cluster on "
        "this machine); needs pip install 'infmon[ray]'",
    )
    g.add_argument(
        "--ray-token-file",
        metavar="FILE",
        help="the cluster's authentication token (Ray's token mode; `ray get-auth-token` prints "
        "it on the head); default: Ray's own RAY_AUTH_TOKEN / RAY_AUTH_TOKEN_PATH / ~/.ray",
    )
    g.add_argument(
        "--ray-placement",
        choices=PLACEMENTS,
        help="spread (default): actors on the nodes other than the controller's, round robin; "
        "pack: Ray's default placement",
    )
    g.add_argument(
        "--ray-timeout",
        metavar="SECONDS",
        type=float,
        help="deadline for each Ray wait: connecting, an actor placed and answering (default 30)",
    )
    g.add_argument(
        "--ray-restart",
        action="store_true",
        help="replace a lost Ray actor by a new one (same placement, version check, clock "
        "sync) and give it back its share; default: the share stays re-split over the others",
    )
    g.add_argument(
        "--url",
        dest="urls",
        action="append",
        metavar="URL",
        help="an endpoint to load (repeat for several; the positional URL counts as the first)",
    )
    g.add_argument(
        "--scrape-url",
        dest="scrape_urls",
        action="append",
        metavar="URL",
        help="also read this server's /metrics into the fleet view, sending it no load (repeat; "
        "e.g. a disaggregated deployment's prefill pods behind the decode pod or router)",
    )
    g.add_argument(
        "--urls-from-prometheus",
        metavar="SELECTOR",
        help="load every target of up{SELECTOR} on --prometheus (and read the fleet from it)",
    )
    g.add_argument(
        "--prometheus", metavar="URL", help="Prometheus server for --urls-from-prometheus"
    )
    g.add_argument(
        "--spread",
        choices=SPREADS,
        help="how requests go to several endpoints (default round-robin)",
    )
    g.add_argument(
        "--metrics-port",
        metavar="[HOST:]PORT",
        help="export infmon's client figures in Prometheus format (HOST default 127.0.0.1; "
        "0.0.0.0 to let another host's Prometheus scrape it)",
    )


def scale_from_args(args: argparse.Namespace) -> ScaleOptions:
    """The options, checked; sets ``args.url`` to the first endpoint when only ``--url`` was
    given (call before ``config_from_args``)."""
    urls = [u for u in ([getattr(args, "url", None), *list(args.urls or [])]) if u]
    if args.urls_from_prometheus:
        if not args.prometheus:
            raise CliError("--urls-from-prometheus needs --prometheus URL")
        urls += urls_from_prometheus(args.prometheus, args.urls_from_prometheus, args)
    try:
        urls = list(dict.fromkeys(normalise_url(u) for u in urls))
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if urls and not getattr(args, "url", None):
        args.url = urls[0]
    workers = _workers(args.workers)
    restart = bool(getattr(args, "ray_restart", False))
    if restart and not args.ray:
        raise CliError("--ray-restart replaces lost Ray actors: it needs --ray ADDRESS")
    if workers is not None and workers > 1 and getattr(args, "in_process", False):
        raise CliError("--in-process runs one worker: drop --workers or --in-process")
    return ScaleOptions(
        workers=workers,
        ray=args.ray,
        ray_token_file=Path(args.ray_token_file) if args.ray_token_file else None,
        ray_placement=args.ray_placement or "spread",
        ray_timeout_s=_positive(args.ray_timeout, "--ray-timeout", 30.0),
        ray_restart=restart,
        urls=tuple(urls) if len(urls) > 1 else (),
        spread=args.spread or ROUND_ROBIN,
        prometheus=args.prometheus,
        selector=args.urls_from_prometheus,
        metrics_addr=_addr(args.metrics_port) if args.metrics_port else None,
        scrape_urls=_scrape_urls(args, urls),
    )


def _scrape_urls(args: argparse.Namespace, loaded: list[str]) -> tuple[str, ...]:
    try:
        urls = [normalise_url(u) for u in getattr(args, "scrape_urls", None) or ()]
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    return tuple(u for u in dict.fromkeys(urls) if u not in loaded)


def _positive(value: float | None, flag: str, default: float) -> float:
    if value is None:
        return default
    if not 0 < value <= 3600:
        raise CliError(f"{flag}: seconds between 0 and 3,600, not {value:g}")
    return value


def _workers(text: str | None) -> int | None:
    if text is None:
        return None
    if text.strip().lower() == "auto":
        return auto_workers()
    try:
        n = int(text)
    except ValueError:
        raise CliError(f"--workers: not a number or auto: {text!r}") from None
    if not 1 <= n <= 1024:
        raise CliError(f"--workers: must be 1 to 1024, got {n}")
    return n


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        p = int(port)
    except ValueError:
        raise CliError(f"--metrics-port: not a port: {text!r}") from None
    if not 0 <= p <= 65535:
        raise CliError(f"--metrics-port: not a port: {text!r}")
    return (host.strip("[]") or "127.0.0.1", p)


def urls_from_prometheus(url: str, selector: str, args: argparse.Namespace) -> list[str]:
    """``http://INSTANCE`` of every series of ``up{SELECTOR}`` (bounded like a scrape)."""
    from infmon.sources.errors import SourceError
    from infmon.sources.promql import PrometheusSource

    try:
        source = PrometheusSource(
            url, selector, ca_bundle=args.ca_bundle, insecure=bool(args.insecure)
        )
        found = source.instances()
    except SourceError as exc:
        raise CliError(f"--urls-from-prometheus: {exc.message}") from None
    if not found:
        raise CliError(f"--urls-from-prometheus: no target of up{{{source.matchers}}} on {url}")
    return [f"http://{i}" if "://" not in i else i for i in found]


PROMETHEUS_WINDOW_S = 60.0
"""Rates and latency windows read through a Prometheus cover this (its scrapes are sparse)."""


def metric_source(
    config: Config, scale: ScaleOptions, metrics_url: str, gpu_metrics: str | None = None
) -> Callable[[], Any]:
    """How the scrape thread makes its source: the fleet through Prometheus, several
    endpoints' own pages, or the one server's page (with ``--gpu-metrics`` joined in)."""
    from infmon.sources.detail import WithMfu

    peak = config.gpu_peak_tflops
    if scale.prometheus and scale.selector:
        from infmon.sources.promql import PrometheusSource

        prom, sel = scale.prometheus, scale.selector
        return lambda: WithMfu(
            PrometheusSource(
                prom,
                sel,
                window_s=PROMETHEUS_WINDOW_S,
                timeout_s=config.metrics_timeout_s,
                max_bytes=config.metrics_max_bytes,
                max_series=config.metrics_max_series,
                ca_bundle=config.ca_bundle,
                insecure=config.insecure,
            ),
            peak,
        )
    if scale.urls or scale.scrape_urls:
        from infmon.sources.fleet import FleetSource

        fleet = (*(scale.urls or (metrics_url,)), *scale.scrape_urls)
        return lambda: WithMfu(FleetSource.from_config(config, fleet), peak)
    from infmon.sources.scraper import direct_source

    return lambda: WithMfu(direct_source(config, metrics_url, gpu_metrics), peak)


def start_exporter(scale: ScaleOptions, engine: Any, wiring: Any) -> Any:
    """``--metrics-port``: infmon's client figures served for a Prometheus (None: not asked)."""
    if scale.metrics_addr is None:
        return None
    from infmon.exporter import ClientExporter

    def level() -> tuple[str, float] | None:
        lv = engine.level
        return None if lv is None or engine.paused else (lv.mode, lv.value)

    exporter = ClientExporter(level, lambda: len(engine.live))
    wiring.on_batch.append(exporter.records)
    wiring.on_window.append(exporter.window)
    wiring.on_lost.append(lambda loss: exporter.lost(loss.worker_id))
    try:
        exporter.start(*scale.metrics_addr)
    except OSError as exc:
        raise CliError(f"--metrics-port {scale.metrics_addr[1]}: {exc.strerror or exc}") from None
    return exporter


FINAL_SCRAPE_WAIT_S = 60.0
"""The longest a finished bench holds its final client figures for Prometheus's next scrape."""


async def stop_exporter(exporter: Any, finished: bool) -> None:
    """Stop ``--metrics-port``'s server; after a finished run, once Prometheus has scraped the
    final figures (said when that takes more than a moment; never after a stop or an error)."""
    if exporter is None:
        return
    linger_s = FINAL_SCRAPE_WAIT_S if finished else 0.0
    if (bound := exporter.linger_bound_s(linger_s)) > 1.0:
        say(
            f"client metrics: holding the final figures for Prometheus's next scrape (≤ {bound:.0f} s)"
        )
    if not await asyncio.to_thread(exporter.stop, linger_s) and finished:
        say("client metrics: Prometheus did not scrape the final figures before infmon stopped")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def make_links(scale: ScaleOptions, log_dir: Path | None, in_process: bool) -> list[Any] | None:
    """The worker links the options ask for; None: the engine's default (one process, or in
    process)."""
    if scale.ray is not None:
        from infmon.engine.ray_link import ray_links
        from infmon.engine.ray_setup import RayOptions

        opts = RayOptions(
            scale.ray,
            scale.ray_token_file,
            "pack" if scale.ray_placement == "pack" else "spread",
            scale.ray_timeout_s,
            scale.ray_restart,
        )
        try:
            return list(ray_links(opts, scale.workers, say=_say, log_dir=log_dir))
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
    n = scale.workers or 1
    if n == 1 or in_process:
        return None
    from infmon.engine.link import ProcessLink

    return [ProcessLink(i, log_dir / f"worker-{i}.log" if log_dir else None) for i in range(n)]


def make_replacement(scale: ScaleOptions, links: Sequence[object] | None) -> Replacement | None:
    """``--ray-restart``: the engine's ``replacement`` for the Ray links (None: not asked)."""
    if not scale.ray_restart or scale.ray is None or not links:
        return None
    from infmon.engine.ray_link import RayLink
    from infmon.engine.ray_restart import ray_replacer

    rays = [link for link in links if isinstance(link, RayLink)]
    return ray_replacer(rays[0].opts, rays, say=_say) if rays else None
