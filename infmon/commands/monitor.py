"""`infmon monitor URL` (also `infmon URL`): the live monitor against a server.

Wires the real parts together: the load engine (a worker process) and the scraper (a thread)
feed one Session and the journal through ``RunWiring``; the ``LiveController`` owns the level;
the Textual app renders the Session on its clock and forwards keys. The final report is written after the terminal is restored, however
the app ended (q, ctrl+c, SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from infmon.clock import Clock, MonotonicClock
from infmon.commands import CliError
from infmon.commands.common import Reachability, default_session_dir, energy_of, open_journal
from infmon.commands.live import LiveController
from infmon.commands.live_baseline import load_reference, watch_baseline
from infmon.commands.load_args import add_load_arguments, config_from_args
from infmon.commands.scale import (
    ScaleOptions,
    add_scale_arguments,
    make_links,
    make_replacement,
    metric_source,
    scale_from_args,
    start_exporter,
)
from infmon.commands.search_args import add_search_arguments, search_from_args
from infmon.commands.wiring import RunWiring, wire_session
from infmon.commands.wrapup import HeldSignals, WrapUp
from infmon.config import Config
from infmon.engine.controller import LoadEngine
from infmon.journal.events import Ended
from infmon.model.live.dial import DialState, LoadDial
from infmon.model.live.session import Session, SessionConfig
from infmon.model.search.live_search import LiveSearch
from infmon.model.server.health import ServerHealth
from infmon.model.steps.span import CLOSED, RATE

RETRY_S = 2.0
"""How often the load retries finding the model while the server is unreachable."""


def add_monitor_arguments(parser: argparse.ArgumentParser) -> None:
    """The monitor's own options (demo shares them)."""
    g = parser.add_argument_group("monitor")
    g.add_argument(
        "--theme",
        default="infmon-dark",
        help="palette: infmon-dark (default), infmon-light, infmon-contrast, or a "
        "user theme from ~/.config/infmon/themes/",
    )
    g.add_argument(
        "--scrape-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="seconds between metric scrapes (default 1)",
    )
    g.add_argument("--metrics-url", metavar="URL", help="metrics page if not URL/metrics")
    g.add_argument(
        "--baseline",
        metavar="RUN",
        help="compare every level live with this run's (a session directory, a report.json "
        "or a `vllm bench serve --save-result` file)",
    )
    g.add_argument(
        "--ui-hz",
        type=float,
        default=4.0,
        metavar="HZ",
        help="most repaints per second (default 4)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url",
        nargs="?",
        help="base URL of the OpenAI-compatible server, e.g. http://vllm:8000 (or --url)",
    )
    add_load_arguments(parser)
    add_monitor_arguments(parser)
    add_scale_arguments(parser)
    add_search_arguments(parser)  # `w` runs this search instead of the doubling sweep


def run(args: argparse.Namespace) -> int:
    args.scale = scale_from_args(args)
    config = config_from_args(args)
    if not config.url:
        raise CliError("give the server's URL (infmon URL, or --url)")
    return run_monitor(config, args)


@dataclass
class Recorder:
    """Operator actions into the journal; reports from it (``s`` and at the end)."""

    journal: Any
    session_dir: Path
    reports: list[str] = field(default_factory=list)
    journal_closed: bool = False
    never_reached: Callable[[], str | None] = lambda: None
    """The one error line when the run never reached its server (else None)."""

    def write_report(self, screenshot_svg: str | None) -> str:
        """Rebuild the reports from the journal; returns the Markdown report's path."""
        if not self.journal_closed:
            self.journal.flush()
        from infmon.report import write_reports

        written = write_reports(
            self.session_dir, screenshot_svg=screenshot_svg, journal_status=self.journal.status()
        )
        main = next((p for p in written if p.suffix == ".md"), self.session_dir)
        self.reports.append(str(main))
        return str(main)


def build_session(config: Config, clock: Clock, health: ServerHealth | None = None) -> Session:
    cfg = SessionConfig(
        endpoint=config.url or "", slo=config.slo, step_warmup_s=config.effective_warmup_s
    )
    return Session(cfg, start_s=clock.now(), health=health)


def build_monitor(
    config: Config,
    args: argparse.Namespace,
    *,
    clock: Clock | None = None,
    in_process: bool = False,
    sweep: bool = False,
) -> tuple[Any, Recorder]:
    """The app wired to the load engine, the scraper, the journal and reports (not running).
    ``sweep``: start the automatic sweep at once (``infmon demo``)."""
    from infmon.sources.thread import ScrapeThread
    from infmon.ui.app import InfmonApp

    clock = clock or MonotonicClock()
    reference = load_reference(getattr(args, "baseline", None))  # before any load is sent
    session_dir = Path(config.session_dir or default_session_dir(config.label))
    journal = open_journal(session_dir, clock)  # an unusable directory: one line, no load sent
    journal.write_config(config.to_public_dict())
    session = build_session(config, clock)
    wiring = wire_session(RunWiring(journal, session.ledger, session.health), session, clock)
    if reference is not None:
        watch_baseline(session, reference, clock.now())
    scale: ScaleOptions = getattr(args, "scale", None) or ScaleOptions()
    reach = Reachability(config.url or "")
    wiring.on_snapshot.append(reach.observe)
    links = make_links(scale, session_dir, in_process)

    engine = LoadEngine(
        config,
        clock,
        on_records=wiring.records,
        on_window=wiring.window,
        on_event=lambda kind, text: session.add_event(clock.now(), kind, text),
        on_load_thread=lambda text: controller.target_resolved(),
        on_lost=wiring.lost,
        retry_s=RETRY_S,
        log_dir=session_dir,
        in_process=in_process,
        links=links,
        replacement=make_replacement(scale, links),
        on_joined=wiring.joined,
        urls=scale.urls,
        spread=scale.spread,
    )
    exporter = start_exporter(scale, engine, wiring)
    started = bool(config.concurrency or config.rate)
    dial = LoadDial(
        DialState(
            RATE if config.rate and not config.concurrency else CLOSED,
            config.concurrency[0] if config.concurrency else 1,
            config.rate[0] if config.rate else 1.0,
            paused=not started,
        ),
        step_s=config.step_duration_s,
    )
    spec = search_from_args(args, config)
    search = None if spec is None else partial(LiveSearch, spec, config.slo, config.step_duration_s)
    session.set_search(spec.goal if spec is not None else None)  # what `w` says it does
    metrics_url = args.metrics_url or config.url or ""
    scrapes = ScrapeThread(
        metric_source(config, scale, metrics_url, getattr(args, "gpu_metrics", None)),
        args.scrape_interval,
        wiring.snapshot,
        clock,
    )
    controller = LiveController(
        engine,
        session,
        wiring,
        journal,
        dial,
        clock,
        warmup_s=config.effective_warmup_s,
        scrapes=scrapes,
        sweep_at_start=sweep,
        exporter=exporter,
        search=search,
    )
    recorder = Recorder(journal, session_dir)
    recorder.never_reached = lambda: (
        controller.fatal
        or (None if reach.reached or engine.ready.is_set() else (reach.error_line()))
    )
    app = InfmonApp(
        session,
        controller=controller,
        clock=clock,
        recorder=recorder,
        theme_name=args.theme,
        ui_hz=args.ui_hz,
        on_shutdown=controller.shutdown,
    )
    controller.on_fatal = app.quit_on_error
    return app, recorder


def finish(app: Any, recorder: Recorder, report: bool = True) -> str:
    """After the app: note why it ended, close the journal, write the final report."""
    recorder.journal.write(Ended("quit", app.exit_reason or "error"))
    recorder.journal.close()
    recorder.journal_closed = True
    return recorder.write_report(app.final_screenshot_svg) if report else ""


def run_monitor(
    config: Config,
    args: argparse.Namespace,
    *,
    clock: Clock | None = None,
    on_exit: Callable[[], None] | None = None,
    sweep: bool = False,
) -> int:
    """Run the app until it quits; then write the final report (whatever ended it).
    ``on_exit`` runs last, also on the forced exit after a lost terminal (demo: stop the sim)."""
    app, recorder = build_monitor(config, args, clock=clock, sweep=sweep)
    signals = HeldSignals()

    def finish_session() -> None:
        try:
            failed = recorder.never_reached()  # nothing to report: one line, status 2
            if failed is None:
                with contextlib.suppress(OSError):  # no terminal left after a SIGHUP
                    app.say_closing()
            out = finish(app, recorder, report=failed is None)
            end = recorder.journal.status()
            wrap.status = 2 if failed else end.exit_code  # 3: records were lost
            place = end.recorded_in(recorder.session_dir)
            with contextlib.suppress(OSError):  # stderr may be a closed pipe (serve gone)
                if not failed and end.line():
                    grade = "error" if end.unwritten_records else "warning"
                    print(f"infmon: {grade}: {end.line()}", file=sys.stderr)
                print(
                    failed or f"infmon: session recorded in {place}; report: {out}", file=sys.stderr
                )
                energy = energy_of(Path(out).parent) if out.endswith(".md") else None
                if energy is not None:  # where GPU power was known, as bench says it
                    print(energy, file=sys.stderr)
        finally:
            if on_exit is not None:
                on_exit()

    wrap = WrapUp(finish_session)
    app.force_exit = wrap.force
    app.before_loop_close = signals.hold  # a signal while the report is written: noted, not fatal
    from infmon.load.runtime import tune_for_load

    tune_for_load()  # uvloop (Textual's App.run uses asyncio.run), gc.freeze
    try:
        app.run()
    finally:
        wrap()
        signals.release()
    if app.return_code and not wrap.status:  # the UI died (Textual printed the traceback)
        wrap.status = app.return_code
    return wrap.status
