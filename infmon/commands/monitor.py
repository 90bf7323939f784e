"""`infmon monitor URL` (also `infmon URL`): the live monitor against a server.

Wires the real parts together: the load driver and the metric poller push into one Session,
every record, scrape and operator action goes to the session journal, and the Textual app renders
the Session on its clock. The final report is written after the terminal is restored, however
the app ended (q, ctrl+c, SIGTERM, SIGHUP).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infmon.clock import Clock, MonotonicClock
from infmon.commands.common import (
    add_load_arguments,
    config_from_args,
    default_session_dir,
    make_workload,
)
from infmon.config import Config
from infmon.model.records import RequestRecord
from infmon.model.session import Session, SessionConfig

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
        "--ui-hz",
        type=float,
        default=4.0,
        metavar="HZ",
        help="most repaints per second (default 4)",
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "url", help="base URL of the OpenAI-compatible server, e.g. http://vllm:8000"
    )
    add_load_arguments(parser)
    add_monitor_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return run_monitor(config_from_args(args), args)


class LiveLoad:
    """The app's load dial over ``LoadDriver``: it finds the model first (retrying while the
    server is unreachable) and then applies whatever level the operator has set meanwhile."""

    def __init__(
        self,
        driver: Any,
        client: Any,
        session: Session,
        clock: Clock,
        max_concurrency: int,
        journal: Any,
    ) -> None:
        self.driver, self.client, self.session, self.clock = driver, client, session, clock
        self.max_concurrency = max_concurrency
        self.journal = journal
        self.ready = False
        self._want: tuple[str, float] = ("closed", 1)
        self._paused = True
        self._step_started: tuple[float, float] | None = None
        """(time, driver in-flight area) when the running step started."""

    @property
    def inflight(self) -> int:
        return int(self.driver.inflight)

    async def run(self) -> None:
        from infmon.load.client import ClientError

        last_error = None
        while not self.ready:
            try:
                model = await self.client.resolve_model()
                await self.client.detect_capabilities()
            except ClientError as exc:
                if str(exc) != last_error:
                    last_error = str(exc)
                    self.session.add_event(self.clock.now(), "error", f"load waits: {exc}")
                await asyncio.sleep(RETRY_S)
                continue
            self.session.set_server_info(model=model)
            caps = self.client.capabilities
            self.journal.write_event(
                "target",
                url=self.client.params.base_url,
                model=model,
                endpoint=self.client.params.endpoint,
                capabilities={
                    "stream_options": caps.stream_options,
                    "vllm_fields": caps.vllm_fields,
                },
            )
            self.ready = True
        self.driver.start()
        self._apply_pause()
        self._apply_level()

    def _apply_pause(self) -> None:
        if self.ready:
            (self.driver.pause if self._paused else self.driver.resume)()

    def _apply_level(self) -> None:
        if not self.ready:
            return
        mode, level = self._want
        self.end_step()
        index = self.driver.next_step()
        self._step_started = (self.clock.now(), self.driver.inflight_area_s())
        self.journal.write_event("step_start", index=index, mode=mode, level=level)
        if mode == "closed":
            self.driver.set_concurrency(int(level))
        else:
            self.driver.set_concurrency(0)
            self.driver.set_rate(level, self.max_concurrency)

    def end_step(self) -> None:
        """Journal the end of the running step with the client's self-check (achieved
        concurrency, event-loop lag), which the report cannot recompute from the records."""
        if self.driver.step <= 0 or self._step_started is None:
            return
        t0, area0 = self._step_started
        held_s = self.clock.now() - t0
        achieved = (self.driver.inflight_area_s() - area0) / held_s if held_s > 0 else math.nan
        lag_s = self.driver.loop_lag_p99_s(since_s=t0)
        self.journal.write_event(
            "step_end",
            index=self.driver.step,
            stats={
                "achieved_concurrency": _rounded(achieved),
                "loop_lag_p99_ms": _rounded(lag_s * 1e3),
            },
        )
        self._step_started = None

    def set_concurrency(self, n: int) -> None:
        self._want = ("closed", n)
        self._apply_level()

    def set_rate(self, rate_per_s: float) -> None:
        self._want = ("rate", rate_per_s)
        self._apply_level()

    def pause(self) -> None:
        self._paused = True
        self._apply_pause()

    def resume(self) -> None:
        self._paused = False
        self._apply_pause()


def _rounded(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 3)


@dataclass
class Recorder:
    """Operator actions into the journal; reports from it (``s`` and at the end)."""

    journal: Any
    session_dir: Path
    reports: list[str] = field(default_factory=list)
    journal_closed: bool = False

    def record_action(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "load":
            kind = "concurrency" if data.get("mode") == "closed" else "rate"
        self.journal.write_event(kind, **data)

    def write_report(self, screenshot_svg: str | None, final: bool) -> str:
        """Rebuild the reports from the journal; returns the Markdown report's path."""
        if not self.journal_closed:
            self.journal.flush()
        from infmon.report import write_reports

        written = write_reports(self.session_dir, screenshot_svg=screenshot_svg)
        main = next((p for p in written if p.suffix == ".md"), self.session_dir)
        self.reports.append(str(main))
        return str(main)


class ServerEvents:
    """Outages, recoveries and restarts of the server, journalled once each."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.down = False

    def __call__(self, snap: Any) -> None:
        state = getattr(snap, "state", "ok")
        if state in ("down", "stale") and not self.down:
            self.down = True
            self.journal.write_event(
                "server_down", error=getattr(snap, "error_message", None), t=snap.timestamp_s
            )
        elif state == "ok" and self.down:
            self.down = False
            self.journal.write_event("server_up", t=snap.timestamp_s)
        if getattr(snap, "server_restarted", False):
            self.journal.write_event("restart", t=snap.timestamp_s)


def build_session(config: Config, clock: Clock) -> Session:
    warmup = config.warmup_s if config.warmup_s is not None else 0.1 * config.step_duration_s
    cfg = SessionConfig(
        endpoint=config.url or "",
        slo=config.slo,
        step_warmup_s=warmup,
        min_step_s=min(5.0, config.step_duration_s),
    )
    return Session(cfg, start_s=clock.now())


def build_monitor(
    config: Config, args: argparse.Namespace, *, clock: Clock | None = None
) -> tuple[Any, Recorder]:
    """The app wired to the real driver, poller, journal and reports (not yet running)."""
    from infmon.journal.writer import JournalWriter
    from infmon.load.client import StreamingClient
    from infmon.load.driver import LoadDriver
    from infmon.sources.poller import MetricPoller
    from infmon.sources.scraper import DirectSource
    from infmon.ui.app import InfmonApp

    clock = clock or MonotonicClock()
    session_dir = Path(config.session_dir or default_session_dir(config.label))
    journal = JournalWriter(session_dir, clock)
    journal.write_config(config.to_public_dict())
    session = build_session(config, clock)
    server_events = ServerEvents(journal)

    def on_record(rec: RequestRecord) -> None:
        session.add_record(rec)
        journal.write_record(rec)

    def on_snapshot(snap: Any) -> None:
        session.ingest_server_snapshot(snap, clock.now())
        server_events(snap)
        if getattr(snap, "state", "ok") == "ok":
            journal.write_scrape(snap)

    client = StreamingClient(config, clock)
    driver = LoadDriver(client, make_workload(config), on_record, clock, seed=config.seed)
    live = LiveLoad(driver, client, session, clock, config.max_concurrency, journal)
    source = DirectSource(args.metrics_url or config.url)
    poller = MetricPoller(source, args.scrape_interval, on_snapshot, clock)
    recorder = Recorder(journal, session_dir)

    async def shutdown() -> None:
        live.end_step()
        await driver.stop()
        await client.aclose()
        await source.aclose()

    app = InfmonApp(
        session,
        driver=live,
        source=poller,
        clock=clock,
        recorder=recorder,
        theme_name=args.theme,
        ui_hz=args.ui_hz,
        step_duration_s=config.step_duration_s,
        load_mode="rate" if config.rate else "closed",
        concurrency=config.concurrency[0] if config.concurrency else 1,
        rate_per_s=config.rate[0] if config.rate else 1.0,
        start_paused=not (config.concurrency or config.rate),
        on_shutdown=shutdown,
    )
    return app, recorder


def finish(app: Any, recorder: Recorder) -> str:
    """After the app: note why it ended, close the journal, write the final report."""
    recorder.journal.write_event("quit", reason=app.exit_reason or "error")
    recorder.journal.close()
    recorder.journal_closed = True
    return recorder.write_report(app.final_screenshot_svg, final=True)


def run_monitor(
    config: Config,
    args: argparse.Namespace,
    *,
    clock: Clock | None = None,
    on_exit: Callable[[], None] | None = None,
) -> int:
    """Run the app until it quits; then write the final report (whatever ended it).
    ``on_exit`` runs last, also on the forced exit after a lost terminal (demo: stop the sim)."""
    app, recorder = build_monitor(config, args, clock=clock)
    done = threading.Lock()

    def wrap_up() -> None:
        if not done.acquire(blocking=False):
            return
        try:
            out = finish(app, recorder)
            print(
                f"infmon: session recorded in {recorder.session_dir}; report: {out}",
                file=sys.stderr,
            )
        finally:
            if on_exit is not None:
                on_exit()

    def force_exit() -> None:
        wrap_up()
        os._exit(0)

    app.force_exit = force_exit
    from infmon.load.runtime import tune_for_load

    tune_for_load()  # uvloop (Textual's App.run uses asyncio.run), gc.freeze
    try:
        app.run()
    finally:
        wrap_up()
    return 0
