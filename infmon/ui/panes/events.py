"""Events: the causes found (one line per cause, with the steps it applied to, the ones still
true first), then state changes, errors and marks, newest last, a repeat counted (×N)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.live.dashboard import Cause, Event
from infmon.model.live.diagnose import steps_label
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

KIND_VARS = {
    "error": "error",
    "server": "error",
    "diagnosis": "warning",
    "mark": "accent",
    "load": "primary",
    "sweep": "primary",
    "report": "success",
}
CAUSE_SHARE = 0.5
"""Causes take at most this share of the pane's rows: the events keep the rest."""


@dataclass(frozen=True)
class EventsInput:
    events: tuple[Event, ...]
    diagnosis: tuple[Cause, ...]


class EventsPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Events"
        yield Body()

    def _cause(self, c: Cause) -> Text:
        style = self.style("warning", True) if c.active else self.style("muted")
        where = steps_label(c.steps)
        line = Text("⚠ " if c.active else "· ", style=style)
        if where:
            line.append(f"{where} · ", style=self.style("muted"))
        line.append(c.text, style=style)
        return line

    def _event(self, ev: Event) -> Text:
        line = Text(f"{f.clock(ev.at_s)} ", style=self.style("muted"))
        line.append(ev.text, style=self.style(KIND_VARS.get(ev.kind, "foreground")))
        if ev.count > 1:
            line.append(f" ×{ev.count:,}", style=self.style("muted"))
        return line

    def watch_snapshot(self, e: EventsInput) -> None:
        body = self.query_one(Body)
        room = max(1, self.content_size.height or 3)
        width = max(20, self.content_size.width or 40)
        causes = [ln for c in e.diagnosis for ln in self._wrap(self._cause(c), width)]
        keep = min(len(causes), max(1, int(room * CAUSE_SHARE))) if e.events else len(causes)
        lines = causes[:keep]
        if keep < len(causes):  # the causes' share is full: say that more is there
            lines[-1] = lines[-1].copy()
            lines[-1].append(" …", style=self.style("muted"))
        events: list[Text] = []
        for ev in reversed(e.events):  # the newest whole events that fit, oldest first
            wrapped = self._wrap(self._event(ev), width)
            if len(lines) + len(events) + len(wrapped) > room:
                break
            events[:0] = wrapped
        lines += events
        if not lines:
            lines = [Text("no events yet", style=self.style("muted"))]
        shown = Text("\n").join(lines[:room])
        shown.no_wrap, shown.overflow = True, "ellipsis"
        body.show(shown)

    def _wrap(self, line: Text, width: int) -> list[Text]:
        """A cause or an event folded at the pane's width: a path or a reason is never cut."""
        return list(line.wrap(self.app.console, width))

    def on_resize(self) -> None:
        self.repaint()
