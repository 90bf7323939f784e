"""The pane base: one reactive ``snapshot``; equal frozen snapshots never repaint."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Static

from infmon.model.base.sanitize import clean, is_clean


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


def safe_text(text: Text) -> Text:
    """``text`` with every control, escape and bidi character shown escaped (``\\x1b``), its
    styles kept: the screen's last line of defence (server text is also sanitised where it
    enters). Newlines and tabs stay; a clean text is returned as it is."""
    if is_clean(text.plain, multiline=True):
        return text
    cuts = sorted({i for span in text.spans for i in (span.start, span.end)} - {0})
    pieces = text.divide(cuts)
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow)
    out.no_wrap, out.end = text.no_wrap, text.end
    for piece in pieces:
        part = Text(clean(piece.plain, None, multiline=True), style=piece.style)
        for span in piece.spans:  # each covers the whole piece (cut at every span boundary)
            part.stylize(span.style)
        out.append_text(part)
    return out


class Body(Static):
    """A pane's text: always given ``rich.text.Text`` (never markup), so untrusted strings stay
    text, and passed through ``safe_text`` so no control sequence reaches the terminal."""

    last_text: Text | None = None
    """What was shown last (the tests read it)."""

    def show(self, text: Text) -> None:
        text = safe_text(text)
        self.last_text = text
        self.update(self._fitted(text))

    def on_resize(self) -> None:
        if self.last_text is not None:
            self.update(self._fitted(self.last_text))

    def _fitted(self, text: Text) -> Text:
        """A ``no_wrap`` text cut to the width, line by line, with its ellipsis. Textual wraps a
        word longer than the line onto the next one (a long model id vanished from the
        one-line header, and took the URL with it); cut here, it stays in view."""
        width = self.content_size.width
        if not text.no_wrap or width <= 0:
            return text
        lines = text.split("\n", allow_blank=True)
        for line in lines:
            line.truncate(width, overflow=text.overflow or "ellipsis")
        out = Text("\n").join(lines)
        out.no_wrap, out.overflow = True, text.overflow
        return out
