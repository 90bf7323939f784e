"""`infmon bench URL`: run load steps, print a table as it goes, optionally write ``--json``."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from infmon.cli import CliError
from infmon.clock import MonotonicClock
from infmon.commands.common import (
    StopSignals,
    add_load_arguments,
    config_from_args,
    default_session_dir,
    make_workload,
    open_journal,
    say,
    write_session_reports,
)
from infmon.commands.serverwatch import ServerWatch
from infmon.config import Config
from infmon.journal import JournalWriter
from infmon.load.client import ClientError, StreamingClient
from infmon.load.driver import LoadDriver
from infmon.load.prompts import Workload
from infmon.load.runtime import tune_for_load
from infmon.load.steps import StepCollector, StepProgress, StepSpec, plan_from_config, run_steps
from infmon.model.knee import find_knee, slo_max_concurrency
from infmon.model.records import RequestRecord
from infmon.model.stats import StepStats

SCHEMA = "infmon.bench/1"
_COLUMNS = (
    "step",
    "load",
    "done",
    "fail",
    "out tok/s",
    "req/s",
    "goodput",
    "TTFT p50/p99 ms",
    "TPOT p50 ms",
    "ITL p50 ms",
    "E2EL p50 s",
    "achieved",
)
_WIDTHS = (4, 10, 6, 5, 10, 7, 7, 16, 11, 10, 10, 8)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--json", metavar="FILE", help=f"write results as JSON (schema {SCHEMA})")
    parser.add_argument(
        "--metrics-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="scrape the server's /metrics this often into the session (default 1)",
    )
    parser.add_argument(
        "--no-server-metrics",
        action="store_true",
        help="do not scrape the server's /metrics during the run",
    )
    add_load_arguments(parser)


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    plan = plan_from_config(config)
    workload = make_workload(config)
    session_dir = (
        Path(config.session_dir) if config.session_dir else default_session_dir(config.label)
    )
    clock = MonotonicClock()
    journal = open_journal(session_dir, clock)
    say(f"session: {session_dir}")
    journal.write_config(config.to_public_dict())
    stop = StopSignals()
    try:
        metrics_interval_s = None if args.no_server_metrics else args.metrics_interval
        tune_for_load()  # uvloop, gc.freeze (infmon.load.runtime)
        result = asyncio.run(
            _bench(config, plan, workload, journal, clock, stop, metrics_interval_s)
        )
    except asyncio.CancelledError:
        if stop.received is None:
            raise
        result = None
    except KeyboardInterrupt:
        stop.received = signal.SIGINT
        raise
    finally:
        _finish(journal, session_dir, stop)
    if result is None:
        say(f"infmon: stopped by {stop.name}", err=True)
        return stop.exit_code
    result["session_dir"] = str(session_dir)
    if args.json:
        _write_json(Path(args.json), result)
    return _verdict(result)


def _finish(journal: JournalWriter, session_dir: Path, stop: StopSignals) -> None:
    """However the run ended: flush the record, then rebuild the reports from it."""
    stop.shield_finish()
    if stop.received is not None:
        journal.write_event("interrupted", signal=stop.name)
    journal.close()
    say(f"session recorded in {session_dir}")
    if journal.status().recorded_records > 0:  # some load ran: report it
        write_session_reports(session_dir, journal.status())


async def _bench(
    config: Config,
    plan: list[StepSpec],
    workload: Workload,
    journal: JournalWriter,
    clock: MonotonicClock,
    stop: StopSignals,
    metrics_interval_s: float | None,
) -> dict[str, Any]:
    stop.install()
    try:
        client = StreamingClient(config, clock)
    except ClientError as exc:
        raise CliError(exc.message) from None
    driver: LoadDriver | None = None
    watch = (
        ServerWatch(config.url or "", metrics_interval_s, journal, clock)
        if metrics_interval_s
        else None
    )
    try:
        if watch is not None:
            watch.start()
        try:
            model = await client.resolve_model()
            caps = await client.detect_capabilities()
        except ClientError as exc:
            raise CliError(exc.message) from None
        target = {"url": config.url, "model": model, "endpoint": config.endpoint}
        journal.write_event(
            "target",
            **target,
            capabilities={"stream_options": caps.stream_options, "vllm_fields": caps.vllm_fields},
        )
        _print_intro(target, caps.vllm_fields, config)
        errors: Counter[str] = Counter()
        collector = StepCollector(journal.write_record, lambda r: _count_error(errors, r))
        driver = LoadDriver(client, workload, collector, clock, seed=config.seed)
        progress = _Progress()
        steps = await run_steps(
            driver,
            collector,
            plan,
            clock=clock,
            slo=config.slo,
            on_step=lambda i, spec, s: _on_step(journal, progress, i, spec, s),
            on_tick=progress.tick,
        )
        result = _result(target, steps, errors, config)
        if watch is not None:
            await watch.stop(final_scrape=True)
            result["server"] = watch.summary(journal.origin["perf_s"])
            if text := watch.describe():
                say(text)
            watch = None
        journal.write_event(
            "bench_summary", knee=result["knee"], slo_max_concurrency=result["slo_max_concurrency"]
        )
        return result
    finally:
        if driver is not None:
            await driver.stop()
            journal.write_event(
                "load_totals",
                sent=driver.sent,
                succeeded=driver.succeeded,
                failed=driver.failed,
                cancelled=driver.cancelled,
            )
        if watch is not None:
            await watch.stop()
        await client.aclose()


def _count_error(errors: Counter[str], rec: RequestRecord) -> None:
    if not rec.ok and rec.error_message:
        errors[f"{rec.error_kind}: {rec.error_message}"] += 1


def _result(
    target: dict[str, Any], steps: list[StepStats], errors: Counter[str], config: Config
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "target": target,
        "steps": [s.to_dict() for s in steps],
        "knee": find_knee(steps),
        "slo_max_concurrency": slo_max_concurrency(steps),
        "slo": config.slo.to_dict(),
        "config": config.to_public_dict(),
        "top_errors": [{"error": e, "count": n} for e, n in errors.most_common(5)],
    }


def _print_intro(target: dict[str, Any], pinned: bool, config: Config) -> None:
    length = "pinned (ignore_eos)" if pinned else "not pinned (server lacks ignore_eos)"
    if not config.ignore_eos:
        length = "not pinned (--no-ignore-eos)"
    say(
        f"target: {target['url']} · model {target['model']} · {target['endpoint']} · output length {length}"
    )
    say("  ".join(c.rjust(w) for c, w in zip(_COLUMNS, _WIDTHS, strict=True)))


def _fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if x is None or x != x else f"{x * scale:,.{digits}f}"


def _row(index: int, spec: StepSpec, s: StepStats) -> str:
    cells = (
        str(index + 1),
        spec.label,
        str(s.completed),
        str(s.failed),
        _fmt(s.output_throughput_tok_s),
        _fmt(s.request_throughput_req_s, digits=2),
        _fmt(s.goodput_req_s, digits=2),
        f"{_fmt(s.ttft.p50, 1e3, 0)}/{_fmt(s.ttft.p99, 1e3, 0)}",
        _fmt(s.tpot.p50, 1e3),
        _fmt(s.itl.p50, 1e3),
        _fmt(s.e2el.p50, digits=2),
        _fmt(s.achieved_concurrency),
    )
    return "  ".join(c.rjust(w) for c, w in zip(cells, _WIDTHS, strict=True))


def _on_step(
    journal: JournalWriter, progress: _Progress, index: int, spec: StepSpec, s: StepStats
) -> None:
    progress.clear()
    say(_row(index, spec, s))
    for note in s.client_notes:
        say(f"      client self-check: {note} (the client may be the bottleneck)")
    if s.tokens_estimated:
        say("      note: server sent no usage; output tokens counted from chunks")
    journal.write_event("step", index=index, stats=s.to_dict())
    journal.flush()


class _Progress:
    """One live status line on a terminal; a line every 10 s otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self._last_line_s = -10.0
        self._shown = False

    def tick(self, p: StepProgress) -> None:
        text = (
            f"  step {p.index + 1}/{p.total} {p.spec.label} {p.phase} {p.elapsed_s:5.0f}s"
            f" · finished {p.finished} · failed {p.failed}"
        )
        if self.tty:
            say("\r" + text.ljust(78)[:78], err=True, end="")
            self._shown = True
        elif p.elapsed_s - self._last_line_s >= 10.0 or p.elapsed_s < self._last_line_s:
            say(text, err=True)
            self._last_line_s = p.elapsed_s

    def clear(self) -> None:
        if self._shown:
            say("\r" + " " * 78 + "\r", err=True, end="")
            self._shown = False
        self._last_line_s = -10.0


def _write_json(path: Path, result: dict[str, Any]) -> None:
    try:
        path.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    print(f"wrote {path}")


def _verdict(result: dict[str, Any]) -> int:
    """0 when every request succeeded; 1 when some failed; a clear error when none succeeded."""
    steps = result["steps"]
    knee, slo_c = result["knee"], result["slo_max_concurrency"]
    if knee:
        print(f"knee: c={knee['concurrency']} ({knee['reason']})")
    if slo_c is not None:
        print(f"highest concurrency meeting the SLO: {slo_c}")
    completed = sum(s["completed"] for s in steps)
    failed = sum(s["failed"] for s in steps)
    top = result["top_errors"][0]["error"] if result["top_errors"] else "unknown error"
    if completed == 0:
        raise CliError(f"no request succeeded ({failed} failed; most common: {top})")
    if failed:
        print(
            f"infmon: {failed} of {completed + failed} requests failed (most common: {top})",
            file=sys.stderr,
        )
        return 1
    return 0
