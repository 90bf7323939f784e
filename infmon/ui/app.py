"""The live monitor: panes fed from one Session snapshot on one render clock, keys that dial the
load in flight, and a clean exit however the session ends (q, ctrl+c, SIGTERM, SIGHUP)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol

from textual import messages
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from infmon.clock import Clock, MonotonicClock
from infmon.model.base.sanitize import clean
from infmon.model.live.dashboard import DashboardSnapshot
from infmon.model.live.session import Session
from infmon.model.live.step_views import closing_text
from infmon.model.steps.span import CLOSED, RATE, Level
from infmon.ui.commands import (
    FOOTER,
    LevelCommands,
    bindings,
    footer_keys,
    help_rows,
    parse_level,
    system_commands,
    w_variant,
)
from infmon.ui.panes import (
    EventsPane,
    GpuPane,
    HeaderBar,
    HintBar,
    KneePane,
    KvPane,
    LatencyPane,
    ServerPane,
    SpecPane,
    ThroughputPane,
)
from infmon.ui.panes.events import EventsInput
from infmon.ui.panes.spec import SpecInput
from infmon.ui.screens import HelpScreen, LevelScreen, MarkScreen
from infmon.ui.themes import DEFAULT_THEME, USER_THEME_DIR, load_themes, resolve_theme_name
from infmon.ui.widgets.footer import KeyFooter

QUITTING = "quitting: stopping the load, then writing the report…"
COMPACT_WIDTH = 120
COMPACT_HEIGHT = 36
"""Below either, the screen folds: numbers first, sparklines instead of charts."""


class Controller(Protocol):
    """The one owner of the load level (``infmon.commands.live.LiveController``): the app
    forwards keys to it and never touches the load itself."""

    def press(self, action: str) -> None: ...
    def set_level(self, level: Level) -> None: ...
    def mark(self, note: str) -> None: ...
    def baseline(self) -> None: ...
    async def run(self) -> None: ...


class Recorder(Protocol):
    """Where operator actions and reports go (the journal and the report writer)."""

    def write_report(self, screenshot_svg: str | None) -> str: ...


class InfmonApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "infmon"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {LevelCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings(),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
    ]

    def __init__(
        self,
        session: Session,
        *,
        controller: Controller | None = None,
        clock: Clock | None = None,
        recorder: Recorder | None = None,
        theme_name: str = DEFAULT_THEME,
        ui_hz: float = 4.0,
        user_theme_dir: Path | None = USER_THEME_DIR,
        handle_signals: bool = True,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        shutdown_timeout_s: float = 3.0,
        force_exit: Callable[[], None] | None = None,
        exit_deadline_s: float = 10.0,
    ) -> None:
        super().__init__()
        self.session = session
        self.controller = controller
        self.clock: Clock = clock or MonotonicClock()
        self.recorder = recorder
        self.ui_hz = ui_hz
        self.handle_signals = handle_signals
        self.on_shutdown = on_shutdown
        """Stops the load and closes clients inside the app's loop, before it ends."""
        self.shutdown_timeout_s = shutdown_timeout_s
        self.force_exit = force_exit
        """Last resort after a signal: if the app has not ended within ``exit_deadline_s``
        (a lost terminal can wedge the app), this finishes the session and exits."""
        self.exit_deadline_s = exit_deadline_s
        self.before_loop_close: Callable[[], None] | None = None
        """Called on unmount, in the app's loop: the command takes the signals over for what it
        does after the app (its event loop would reset them to their fatal defaults)."""
        self._quitting = False
        self.final_screenshot_svg: str | None = None
        self.exit_reason: str | None = None
        self.last_snapshot: DashboardSnapshot | None = None
        self.reports_written: list[str] = []
        self.closing_summary: str | None = None
        """Set once the load has stopped on the way out (printed after the app exits)."""
        self._footer_state: tuple[dict[str, str], set[str]] = ({}, set())
        themes, self.theme_problems = load_themes(user_theme_dir)
        for theme in themes:
            self.register_theme(theme)
        self.theme_names = [t.name for t in themes]
        self.theme = resolve_theme_name(theme_name, self.theme_names) or DEFAULT_THEME

    # ---- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield HeaderBar(id="header")
        yield HintBar(id="hint")
        with Horizontal(id="row-top"):
            yield ThroughputPane(id="throughput")
            yield LatencyPane(id="latency")
        with Horizontal(id="row-mid"):
            yield ServerPane(id="server")
            yield KvPane(id="kv")
            yield SpecPane(id="spec")
            yield GpuPane(id="gpu")
        with Horizontal(id="row-bottom"):
            yield KneePane(id="knee")
            yield EventsPane(id="events")
        yield KeyFooter(show_command_palette=False)

    def get_system_commands(self, screen: Screen) -> Any:
        """infmon's commands only: Textual's own (a second Quit, Screenshot, its theme
        picker of non-infmon palettes) would duplicate or bypass ours."""
        yield from system_commands(self)

    # ---- the footer ---------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A footer entry (``action('variant')``) shows while its variant is the current one
        and the width has room for it; the hidden twin binding (no parameter) always runs."""
        if not parameters:
            return True
        variants, shown = self._footer_state
        variant = str(parameters[0])
        if action not in shown:
            return False
        return variant == variants.get(action, FOOTER)

    def _update_footer(self, width: int | None = None) -> None:
        h = self.last_snapshot.header if self.last_snapshot is not None else None
        paused = h is None or h.paused
        started = h is not None and h.started
        variants = {
            "toggle_pause": "pause" if not paused else ("resume" if started else "start"),
            "toggle_sweep": w_variant(h.search if h else None, h is not None and bool(h.sweep)),
            "toggle_mode": CLOSED if h is None or h.load_mode != RATE else RATE,
        }
        state = (variants, footer_keys(width or self.size.width, variants))
        if state != self._footer_state:
            self._footer_state = state
            self.refresh_bindings()

    def on_mount(self) -> None:
        self._fold(self.size.width, self.size.height)
        # the footer may have composed before the first ``_update_footer``: word it again
        # once the screen is up (else it can stay empty until the state next changes)
        self.call_after_refresh(self.refresh_bindings)
        now = self.clock.now()
        for problem in self.theme_problems:
            self.session.add_event(now, "error", f"theme skipped: {problem}")
        if self.controller is not None:
            self.run_worker(self.controller.run(), group="load", exit_on_error=False)
        if self.ui_hz > 0:
            self.set_interval(1 / self.ui_hz, self.render_tick)
        if self.handle_signals:
            self._install_signal_handlers()
        self.render_tick()

    def on_resize(self, event: Any) -> None:
        self._fold(event.size.width, event.size.height)
        self._update_footer(event.size.width)

    def _fold(self, width: int, height: int) -> None:
        compact = width < COMPACT_WIDTH or height < COMPACT_HEIGHT
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            self.call_after_refresh(self._repaint_all)

    def _repaint_all(self) -> None:
        for pane in self.query("Pane"):
            pane.repaint()  # type: ignore[attr-defined]

    # ---- the render clock ---------------------------------------------------------------------
    def render_tick(self) -> None:
        """Synchronous and cheap: one snapshot, assigned to every pane in one batch."""
        snap = self.session.snapshot(self.clock.now())
        self.last_snapshot = snap
        with self.batch_update():
            self.query_one(HeaderBar).snapshot = snap.header
            self.query_one(HintBar).snapshot = snap.header.hint
            self.query_one(ThroughputPane).snapshot = snap.throughput
            self.query_one(LatencyPane).snapshot = snap.latency
            self.query_one(ServerPane).snapshot = snap.server
            self.query_one(KvPane).snapshot = snap.server
            self.query_one(SpecPane).snapshot = SpecInput(
                snap.server.spec, snap.latency.itl.p50_s, snap.latency.tpot.p50_s
            )
            self.query_one(GpuPane).snapshot = snap.gpu
            self.query_one(KneePane).snapshot = snap.knee
            self.query_one(EventsPane).snapshot = EventsInput(snap.events, snap.diagnosis)
        self._update_footer()

    # ---- workers and signals ------------------------------------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker, now = event.worker, self.clock.now()
        if worker.group == "report" and event.state == WorkerState.SUCCESS:
            path = str(worker.result)
            self.reports_written.append(path)
            self.session.add_event(now, "report", f"report written: {path}")
            self.notify(f"report written: {path}", timeout=4)
        elif event.state == WorkerState.ERROR:
            err = worker.error
            self.session.add_event(now, "error", f"{worker.group}: {type(err).__name__}: {err}")

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig.name)
            except (NotImplementedError, RuntimeError, ValueError):
                continue

    def _on_signal(self, name: str) -> None:
        self.exit_reason = name
        if name == "SIGHUP":
            _detach_terminal()
        self._quit()
        if self.force_exit is not None:
            timer = threading.Timer(self.exit_deadline_s, self.force_exit)
            timer.daemon = True
            timer.start()

    def on_unmount(self) -> None:
        if not self.handle_signals:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(sig)
        if self.before_loop_close is not None:
            self.before_loop_close()

    # ---- operator actions (all through the controller) ------------------------------------------
    def _press(self, action: str) -> None:
        if self.controller is not None:
            self.controller.press(action)
        self.render_tick()

    def action_load_up(self, _variant: str = "") -> None:
        self._press("up")

    def action_load_down(self, _variant: str = "") -> None:
        self._press("down")

    def action_load_double(self, _variant: str = "") -> None:
        self._press("double")

    def action_load_halve(self, _variant: str = "") -> None:
        self._press("halve")

    def action_toggle_mode(self, _variant: str = "") -> None:
        self._press("mode")

    def action_toggle_pause(self, _variant: str = "") -> None:
        self._press("pause")

    def action_toggle_sweep(self, _variant: str = "") -> None:
        self._press("sweep")

    def action_mark(self, _variant: str = "") -> None:
        def done(note: str | None) -> None:
            if note is not None and self.controller is not None:
                self.controller.mark(note)
                self.render_tick()

        self.push_screen(MarkScreen(), done)

    def set_level(self, level: Level) -> None:
        """The palette's "set concurrency N" (``LevelCommands``): the operator's level."""
        if self.controller is not None:
            self.controller.set_level(level)
        self.render_tick()

    def action_set_level(self, problem: str = "") -> None:
        """Ask for a level, then set it (a text that is no level asks again, saying why)."""

        def done(text: str | None) -> None:
            if not text:
                return
            level = parse_level(text)
            if level is None:
                self.action_set_level(f"not a level: {text!r} (e.g. 64, or rate 5)")
            else:
                self.set_level(level)

        self.push_screen(LevelScreen(problem), done)

    def action_baseline(self, _variant: str = "") -> None:
        if self.controller is not None:
            self.controller.baseline()
        self.render_tick()

    def action_snapshot_report(self, _variant: str = "") -> None:
        svg = self.export_screenshot()
        if self.recorder is None:
            self.session.add_event(
                self.clock.now(), "error", "no session directory: report not written"
            )
            self.render_tick()
            return
        recorder = self.recorder
        self.run_worker(
            lambda: recorder.write_report(svg),
            thread=True,
            group="report",
            exit_on_error=False,
        )

    def action_next_theme(self, _variant: str = "") -> None:
        names = self.theme_names or [self.theme]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    def action_toggle_anatomy(self, _variant: str = "") -> None:
        pane = self.query_one(LatencyPane)
        pane.show_anatomy = not pane.show_anatomy

    def action_help(self, _variant: str = "") -> None:
        h = self.last_snapshot.header if self.last_snapshot is not None else None
        self.push_screen(HelpScreen(help_rows(h.search if h is not None else None)))

    def say_closing(self) -> None:
        """On the restored terminal: the session in one paragraph (stdout) and a word that
        the report is being written (stderr); the command calls it before it writes it."""
        if self.closing_summary:
            print(clean(self.closing_summary, 2000), flush=True)
            print("infmon: writing the report…", file=sys.stderr, flush=True)

    def quit_on_error(self) -> None:
        """The load can never start (the command says why, with status 2): leave at once."""
        self.exit_reason = self.exit_reason or "error"
        self._quit()

    def on_exit_app(self, message: messages.ExitApp) -> None:
        """In a browser, textual-serve asks the app to quit when its page closes (and the web
        driver does on a signal): a quit like ``q`` (the load stopped, the screen kept for the
        report), not Textual's bare exit."""
        if self._quitting or not self.is_web:
            return
        message.prevent_default()
        self.exit_reason = self.exit_reason or "page closed"
        self._quit()

    async def action_quit(self, _variant: str = "") -> None:
        self.exit_reason = self.exit_reason or "quit"
        self._quit()

    def _quit(self) -> None:
        """Keep the screen as it was (the final report's screenshot), stop the load, leave; the
        command writes the final report once the terminal is restored."""
        if self._quitting:
            return
        self._quitting = True
        try:
            self.final_screenshot_svg = self.export_screenshot()
        except Exception as exc:  # the screen may already be gone (lost terminal)
            self.session.add_event(self.clock.now(), "error", f"screenshot failed: {exc}")
        self.session.set_hint(QUITTING)
        with contextlib.suppress(Exception):  # said at once, before the load is stopped
            self.render_tick()
        self.run_worker(self._shutdown_and_exit(), group="shutdown", exit_on_error=False)

    async def _shutdown_and_exit(self) -> None:
        try:
            if self.on_shutdown is not None:
                await asyncio.wait_for(self.on_shutdown(), self.shutdown_timeout_s)
        except (asyncio.TimeoutError, Exception) as exc:
            self.session.add_event(self.clock.now(), "error", f"shutdown: {type(exc).__name__}")
        finally:
            self.closing_summary = closing_text(self.session.closing(self.clock.now()))
            if self.exit_reason == "SIGHUP" and self.force_exit is not None:
                self.force_exit()  # no terminal left to restore: finish the session and go
            self.exit()


def _detach_terminal() -> None:
    """The SSH link dropped: send stdin/stdout/stderr to /dev/null so that restoring a terminal
    that no longer exists cannot fail or block."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            os.dup2(null, fd)
    os.close(null)


__all__ = ["Controller", "InfmonApp", "Recorder", "SystemCommand"]
