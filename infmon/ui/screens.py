"""Modal screens: the key help (``?``), the mark note prompt (``m``) and the palette's level
prompt ("Set concurrency to N")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static


class HelpScreen(ModalScreen[None]):
    """Every key, with what it does; any of escape, ? or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "dismiss", "close")]

    def __init__(self, keys: Iterable[tuple[str, str]]) -> None:
        super().__init__()
        self._keys = list(keys)

    def compose(self) -> ComposeResult:
        text = Text()
        for key, description in self._keys:
            text.append(f"{key:>7}  ", style="bold")
            text.append(f"{description}\n")
        text.append("\nAll of these are also in the command palette (ctrl+p).", style="dim")
        with Vertical(id="help-box"):
            yield Label("infmon keys", id="help-title")
            yield Static(text, id="help-keys")

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)


class MarkScreen(ModalScreen[str | None]):
    """Ask for the note of a mark ("switched to FP8"); escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="mark-box"):
            yield Label("Mark: what changed? (enter to save, escape to cancel)")
            yield Input(placeholder="switched to FP8", id="mark-note", max_length=200)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class LevelScreen(ModalScreen[str | None]):
    """Ask for a level ("64", "rate 5"); the caller parses it and says what it refused."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel")]

    def __init__(self, problem: str = "") -> None:
        super().__init__()
        self.problem = problem

    def compose(self) -> ComposeResult:
        with Vertical(id="mark-box"):
            yield Label("Set the load: concurrency, or `rate N` in req/s (escape cancels)")
            if self.problem:
                yield Label(self.problem, id="level-problem")
            yield Input(placeholder="64", id="level-value", max_length=40)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
