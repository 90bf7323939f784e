"""Events: state changes, errors, marks and diagnosis lines, newest last."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.dashboard import Event
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


@dataclass(frozen=True)
class EventsInput:
    events: tuple[Event, ...]
    diagnosis: tuple[str, ...]


class EventsPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Events"
        yield Body()

    def watch_snapshot(self, e: EventsInput) -> None:
        room = max(1, self.content_size.height or 3)
        lines: list[Text] = [Text(f"⚠ {d}", style=self.style("warning", True)) for d in e.diagnosis]
        for ev in e.events[-max(1, room - len(lines)) :]:
            line = Text(f"{f.clock(ev.at_s)} ", style=self.style("muted"))
            line.append(ev.text, style=self.style(KIND_VARS.get(ev.kind, "foreground")))
            lines.append(line)
        if not lines:
            lines = [Text("no events yet", style=self.style("muted"))]
        shown = Text("\n").join(lines[:room])
        shown.no_wrap, shown.overflow = (
            True,
            "ellipsis",
        )  # one event, one line: the newest stays in view
        self.query_one(Body).show(shown)

    def on_resize(self) -> None:
        self.repaint()
