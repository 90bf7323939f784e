"""`infmon bench URL`: run load steps, print a table as it goes, optionally write ``--json``.

The load runs in a worker process (``infmon.engine``), the same engine as the monitor's, so
the same load gives the same figures; ``--in-process`` runs it on this process's loop instead
(``bench/monitor_truth.py`` compares the two). The server is scraped on a thread of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from infmon.clock import MonotonicClock
from infmon.commands import CliError
from infmon.commands.against import Against, StepComparer, kv_line, read_options
from infmon.commands.against import finish as finish_against
from infmon.commands.bench_out import (
    BenchProgress,
    describe_health,
    health_summary,
    print_intro,
    result_doc,
    say_wrapped,
    verdict,
    write_json,
)
from infmon.commands.bench_partial import partial_step
from infmon.commands.budget import BudgetedPlan
from infmon.commands.common import (
    StopSignals,
    check_dir_usable,
    check_reachable,
    default_session_dir,
    make_workload,
    open_journal,
    say,
    write_session_reports,
)
from infmon.commands.load_args import add_load_arguments, config_from_args
from infmon.commands.scale import (
    ScaleOptions,
    add_scale_arguments,
    make_links,
    make_replacement,
    metric_source,
    scale_from_args,
    start_exporter,
    stop_exporter,
)
from infmon.commands.search_args import add_search_arguments, run_search, search_from_args
from infmon.commands.simfit_rounds import session_wander
from infmon.commands.trials_out import (
    TrialOptions,
    add_trial_arguments,
    loose_note,
    stop_rule,
    trials_from_args,
    write_trials,
)
from infmon.commands.wiring import RunWiring
from infmon.config import Config
from infmon.engine.controller import EngineError, LoadEngine, Target
from infmon.engine.runner import StepRunner, StepSpec, plan_from_config
from infmon.journal import JournalWriter
from infmon.journal.events import BenchSummary, Ended, LoadTotals, TargetResolved
from infmon.load.runtime import tune_for_load
from infmon.model.compare.baseline import Reference
from infmon.model.search.policy import SearchSpec
from infmon.model.steps.ledger import StepLedger
from infmon.report.doc import BENCH_SCHEMA as SCHEMA
from infmon.sources.errors import SourceError
from infmon.sources.thread import ScrapeThread


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", nargs="?", help="server base URL, e.g. http://127.0.0.1:8000 (or --url)"
    )
    parser.add_argument("--json", metavar="FILE", help=f"write results as JSON (schema {SCHEMA})")
    parser.add_argument(
        "--metrics-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="scrape the server's /metrics this often into the session (default 1)",
    )
    parser.add_argument("--metrics-url", metavar="URL", help="metrics page if not URL/metrics")
    parser.add_argument(
        "--no-server-metrics",
        action="store_true",
        help="do not scrape the server's /metrics during the run",
    )
    parser.add_argument(
        "--wide", action="store_true", help="more columns: goodput, ITL, achieved concurrency"
    )
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="run the load on this process's loop instead of a worker process",
    )
    add_against_arguments(parser)
    add_load_arguments(parser)
    add_scale_arguments(parser)
    add_search_arguments(parser)
    add_trial_arguments(parser)


def add_against_arguments(parser: argparse.ArgumentParser) -> None:
    """``--baseline`` and ``--fail-if`` (``method`` shares them)."""
    parser.add_argument(
        "--baseline",
        metavar="RUN",
        help="compare each step with this run's at the same level (a session directory, a "
        "report.json or a `vllm bench serve --save-result` file); writes compare.txt/json",
    )
    parser.add_argument(
        "--fail-if",
        metavar="RULES",
        help="exit 1 when a change against --baseline crosses a rule beyond noise, e.g. "
        '"tok/s<-5%%,ttft_p90>+10%%"',
    )


def run(args: argparse.Namespace) -> int:
    args.scale = scale_from_args(args)  # sets args.url from --url: before the config
    return run_with(args, read_options(args.baseline, args.fail_if))


def run_with(args: argparse.Namespace, against: Against, compare: bool = True) -> int:
    """The bench run; against ``against.reference`` step by step when there is one, and at
    the end (``compare``) the comparison report and the ``--fail-if`` verdict."""
    scale: ScaleOptions = getattr(args, "scale", None) or ScaleOptions()
    config = replace(config_from_args(args), realtime_again=False)  # one priority per run
    if not config.url:
        raise CliError("give the server's URL (infmon bench URL, or --url)")
    plan: Sequence[StepSpec] = plan_from_config(config)
    if (deadline_s := getattr(args, "deadline_s", None)) is not None:  # the headless demo
        plan = BudgetedPlan(plan, deadline_s, MonotonicClock())
    search = search_from_args(args, config)
    trials = trials_from_args(args)
    if search is not None and (trials.active or trials.retake):
        raise CliError(
            "--search and --repeat/--until-ci/--retake: give one (a search re-measures itself)"
        )
    make_workload(config)  # a bad dataset is an error before anything starts
    session_dir = (
        Path(config.session_dir) if config.session_dir else default_session_dir(config.label)
    )
    check_dir_usable(session_dir)  # so are an unusable directory and an unreachable server:
    check_reachable(config)  # neither leaves a session directory behind
    clock = MonotonicClock()
    before = _listing(session_dir)
    journal = open_journal(session_dir, clock)
    say(f"session: {session_dir}")
    journal.write_config(config.to_public_dict())
    stop = StopSignals()
    opts = _Options(
        None if args.no_server_metrics else args.metrics_interval,
        args.wide,
        args.in_process,
        scale,
    )
    opts.reference = against.reference
    opts.gpu_metrics = getattr(args, "gpu_metrics", None)
    opts.metrics_url = getattr(args, "metrics_url", None)
    opts.search = search
    opts.trials = trials
    refused: _Before | None = None  # a one-line error: no session is left if nothing ran
    try:
        tune_for_load()  # uvloop, gc.freeze (infmon.load.runtime)
        result = asyncio.run(_bench(config, plan, journal, clock, stop, opts, session_dir))
    except asyncio.CancelledError:
        if stop.received is None:
            raise
        result = None
    except KeyboardInterrupt:
        stop.received = signal.SIGINT
        raise
    except CliError:
        refused = _Before(before)
        raise
    finally:
        _finish(journal, session_dir, stop, refused)
    if result is None:
        say(f"infmon: stopped by {stop.name}", err=True)
        return stop.exit_code
    result["session_dir"] = str(session_dir)
    if trials.active and (wander := session_wander(session_dir)) is not None:
        say_wrapped(wander)  # the server's pace or this client's reading
    if args.json:
        write_json(Path(args.json), result)
    status = max(verdict(result), journal.status().exit_code)  # 3: records were lost
    if line := kv_line(Path(journal.status().recorded_in(session_dir))):
        say(line)
    return max(status, finish_against(against, session_dir)) if compare else status


class _Options:
    def __init__(
        self, metrics_interval_s: float | None, wide: bool, in_process: bool, scale: ScaleOptions
    ) -> None:
        self.metrics_interval_s, self.wide, self.in_process = metrics_interval_s, wide, in_process
        self.scale = scale
        self.reference: Reference | None = None
        self.gpu_metrics: str | None = None
        self.metrics_url: str | None = None
        self.search: SearchSpec | None = None
        self.trials = TrialOptions()


@dataclass(frozen=True, slots=True)
class _Before:
    """The names a session directory held before the run (None: it did not exist)."""

    names: frozenset[str] | None


def _listing(directory: Path) -> frozenset[str] | None:
    """The names in ``directory`` before the run (None: it did not exist)."""
    try:
        return frozenset(p.name for p in directory.iterdir())
    except FileNotFoundError:
        return None
    except OSError:
        return frozenset()  # unreadable: ``open_journal`` says why; nothing will be removed


def _discard(session_dir: Path, before: frozenset[str] | None) -> None:
    """Remove what this run made in ``session_dir`` (and the directory if it made it): a
    run refused before any request was recorded leaves nothing behind."""
    for path in session_dir.iterdir():
        if before is None or path.name not in before:
            with contextlib.suppress(OSError):
                path.unlink()
    if before is None:
        with contextlib.suppress(OSError):
            session_dir.rmdir()


def _finish(
    journal: JournalWriter,
    session_dir: Path,
    stop: StopSignals,
    refused: _Before | None = None,
) -> None:
    """However the run ended: flush the record, then rebuild the reports from it. A run
    ``refused`` (a one-line error; the names the directory held before) that recorded no
    request leaves no session behind."""
    stop.shield_finish()
    if stop.received is not None:
        journal.write(Ended("interrupted", stop.name))
    journal.close()
    end = journal.status()
    if refused is not None and end.recorded_records == 0 and not end.unwritten_records:
        _discard(session_dir, refused.names)
        return
    say(f"session recorded in {end.recorded_in(session_dir)}")
    if end.recorded_records > 0 or end.unwritten_records:  # some load ran: report it
        write_session_reports(session_dir, end)


async def _bench(
    config: Config,
    plan: Sequence[StepSpec],
    journal: JournalWriter,
    clock: MonotonicClock,
    stop: StopSignals,
    opts: _Options,
    session_dir: Path,
) -> dict[str, Any]:
    stop.install()
    ledger = StepLedger(config.slo)
    wiring = RunWiring(journal, ledger)
    links = make_links(opts.scale, session_dir, opts.in_process)

    def load_thread_changed(text: str) -> None:
        say(f"load thread: {text}", err=True)  # real time given up: the report says it too
        if engine.target is not None:
            _journal_target(journal, config, engine.target, opts.scale.urls)

    engine = LoadEngine(
        config,
        clock,
        on_records=wiring.records,
        on_window=wiring.window,
        on_event=lambda kind, text: say(f"infmon: {text}", err=True),
        on_load_thread=load_thread_changed,
        on_lost=wiring.lost,
        in_process=opts.in_process,
        log_dir=session_dir,
        links=links,
        replacement=make_replacement(opts.scale, links),
        on_joined=wiring.joined,
        urls=opts.scale.urls,
        spread=opts.scale.spread,
    )
    scrapes = _scraper(config, opts, wiring, clock)
    exporter = start_exporter(opts.scale, engine, wiring)
    finished = False
    progress: BenchProgress | None = None
    stopped_at: float | None = None
    if exporter is not None:
        say(f"client metrics: http://{exporter.address[0]}:{exporter.address[1]}/metrics")
    try:
        if scrapes is not None:
            try:
                scrapes.start()
            except SourceError as exc:
                scrapes = None
                raise CliError(exc.message) from None
        try:
            target = await engine.start()
        except EngineError as exc:
            raise CliError(exc.message) from None
        _journal_target(journal, config, target, opts.scale.urls)
        if engine.workers > 1 or opts.scale.ray:
            kind = "Ray actors" if opts.scale.ray else "worker processes"
            say(f"load: {engine.workers} {kind}")
        if target.workload is not None:
            w = target.workload
            journal.write_event("workload", **w.to_dict())
            say(f"prompts: {w.workload}, {w.sizing} · seed {config.seed}")
        print_intro(config, target, opts.wide, opts.scale.urls)
        progress = BenchProgress(opts.wide, journal)
        if opts.reference is not None:
            progress.comparer = StepComparer(ledger, opts.reference)
            progress.clock = clock
        runner = StepRunner(
            engine,
            ledger,
            clock,
            on_events=wiring.step_events,
            scrape_edge=scrapes.scrape_edge if scrapes else None,
            counts=lambda i: (wiring.done[i], wiring.failed[i]),
            retakes=opts.trials.retake,
            realtime_wait=engine.realtime_wait_s,
            on_retake=progress.retake,
        )
        found: dict[str, Any] | None = None
        trials: list[dict[str, object]] | None = None
        if opts.trials.active:
            results = await runner.rounds(
                plan, opts.trials.repeat, stop_rule(opts.trials), progress.step, progress.tick
            )
            trials = write_trials([r for r, _ in results], session_dir, {}, opts.trials.until_on)
            if note := loose_note([r for r, _ in results], opts.trials):
                say_wrapped(note)
        elif opts.search is None:
            results = await runner.run(plan, on_step=progress.step, on_tick=progress.tick)
        else:
            results, found = await run_search(
                runner, opts.search, plan[0], config, journal, session_dir, progress
            )
        if scrapes is not None:
            await scrapes.stop(final_scrape=True)
            scrapes = None
            if text := describe_health(wiring):
                say(text)
        out = result_doc(config, target, results, wiring.errors, ledger)
        out["server"] = health_summary(wiring, journal.origin["perf_s"])
        if found is not None:
            out["search"] = found
        if trials is not None:
            out["trials"] = trials
        journal.write(BenchSummary(out["knee"], out["slo_max_concurrency"]))
        finished = True
        return out
    except asyncio.CancelledError:  # a signal (Ctrl-C: asyncio.run cancels this task)
        stopped_at = clock.now()
        raise
    finally:
        totals = await engine.stop()
        if stopped_at is not None and progress is not None:
            name = stop.name if stop.received is not None else "Ctrl-C (SIGINT)"
            progress.clear()
            partial_step(ledger, wiring, journal, progress.last, stopped_at, name, opts.wide)
        journal.write(LoadTotals(totals.sent, totals.succeeded, totals.failed, totals.cancelled))
        if scrapes is not None:
            await scrapes.stop()
        await stop_exporter(exporter, finished)


def _scraper(
    config: Config, opts: _Options, wiring: RunWiring, clock: MonotonicClock
) -> ScrapeThread | None:
    interval_s = opts.metrics_interval_s
    if interval_s is None:
        return None
    return ScrapeThread(
        metric_source(config, opts.scale, opts.metrics_url or config.url or "", opts.gpu_metrics),
        interval_s,
        wiring.snapshot,
        clock,
        max_backoff_s=max(4.0, interval_s),
    )


def _journal_target(
    journal: JournalWriter, config: Config, target: Target, urls: tuple[str, ...] = ()
) -> None:
    caps = {
        "stream_options": target.stream_options,
        "vllm_fields": target.vllm_fields,
        "per_request_metrics": target.per_request_metrics,
    }
    journal.write(
        TargetResolved(
            config.url, target.model, target.endpoint, caps, urls, target.load_thread or None
        )
    )
