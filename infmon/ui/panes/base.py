"""The pane base: one reactive ``snapshot``; equal frozen snapshots never repaint."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static


class Pane(Vertical):
    snapshot: reactive[Any] = reactive(None, init=False)
    """The pane's part of the ``DashboardSnapshot`` (a frozen dataclass)."""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.repaint())

    def repaint(self) -> None:
        """Re-render with the current theme's colours."""
        if self.snapshot is not None:
            self.watch_snapshot(self.snapshot)

    def watch_snapshot(self, snapshot: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def color(self, var: str) -> str:
        return self.app.theme_variables.get(var, "")

    def style(self, var: str, bold: bool = False) -> str:
        c = self.color(var)
        return f"bold {c}" if bold and c else ("bold" if bold else c)


class Body(Static):
    """A pane's text: always given ``rich.text.Text`` (never markup), so untrusted strings stay text."""

    last_text: Text | None = None
    """What was shown last (the tests read it)."""

    def show(self, text: Text) -> None:
        self.last_text = text
        self.update(text)
