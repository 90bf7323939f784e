"""The header line (the load you set, its state, the sweep's progress, failures, the baseline,
the backend, model and endpoint) fitted to the width by priority; and the hint line under it.

When the line is too long the endpoint is shortened first, then the model, then the least
needed parts are left out, so at 120 columns the backend and the baseline stay in view.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.live.dashboard import HeaderView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

STATE_VARS = {
    "running": "success",
    "sweeping": "accent",
    "searching": "accent",
    "paused": "warning",
    "server down": "error",
}
SEP = " · "


@dataclass
class Part:
    text: str
    style: str
    rank: int
    """Which goes first when the width runs out: the highest rank."""
    min_len: int = 0
    """Shortened down to this (with an ellipsis) before being left out; 0: never shortened."""


def fit(parts: list[Part], width: int) -> list[Part]:
    """``parts`` within ``width`` columns (separators included): shorten, then leave out, the
    highest-ranked ones first."""
    parts = [Part(p.text, p.style, p.rank, p.min_len) for p in parts]

    def total() -> int:
        return sum(len(p.text) for p in parts) + len(SEP) * (len(parts) - 1)

    for rank in sorted({p.rank for p in parts}, reverse=True):
        for p in [p for p in parts if p.rank == rank]:
            over = total() - width
            if over <= 0:
                return parts
            if p.min_len and len(p.text) - over >= p.min_len:
                p.text = p.text[: len(p.text) - over - 1] + "…"
                return parts
            if rank > 0:
                parts.remove(p)
    return parts


class HeaderBar(Pane):
    def compose(self) -> ComposeResult:
        yield Body(id="header-text")

    def watch_snapshot(self, h: HeaderView) -> None:
        muted = self.style("muted")
        backend = " ".join(x for x in (h.backend, h.backend_version) if x) or "backend ?"
        inflight = (
            f" ({h.inflight_requests:,} in flight)" if h.inflight_requests is not None else ""
        )
        state = self.style(STATE_VARS.get(h.state, "foreground"), bold=True)
        parts = [
            Part(f.level(h.load_mode, h.load_level) + inflight, "bold", 0),
            Part(f"{h.state} {f.clock(h.elapsed_s)}", state, 0),
        ]
        if h.sweep:
            parts.append(Part(h.sweep, self.style("accent"), 1))
        if h.backoff:
            parts.append(Part(h.backoff, self.style("warning"), 1))
        if h.journal:
            parts.append(Part(h.journal, self.style("error"), 1, 24))
        failed = f"{h.failed:,} failed" + (f", {h.cancelled:,} cancelled" if h.cancelled else "")
        parts.append(Part(failed, self.style("error" if h.failed else "muted"), 2))
        if h.baseline_run is not None:  # --baseline RUN: what it is and what changed
            changes = "; ".join(h.baseline_changes) or "no config change seen"
            parts.append(Part(f"vs {h.baseline_run} ({changes})", self.style("accent"), 3, 24))
        if h.baseline_step is not None:
            where = f" ({h.baseline_label})" if h.baseline_label else ""
            parts.append(Part(f"baseline step {h.baseline_step}{where}", muted, 3))
        parts.append(Part(backend, "", 4, 12))
        parts.append(Part(h.model or "model ?", "", 5, 16))
        parts.append(Part(h.endpoint or "—", muted, 6, 16))
        lead = " infmon "
        width = max(20, (self.content_size.width or 120) - len(lead) - 1)
        text = Text(lead, style=self.style("primary", bold=True), no_wrap=True, overflow="ellipsis")
        text.append(" ")
        for i, p in enumerate(fit(parts, width)):
            if i:
                text.append(SEP, muted)
            text.append(p.text, p.style)
        self.query_one(Body).show(text)

    def on_resize(self) -> None:
        self.repaint()


class HintBar(Pane):
    """One line under the header saying what to do (``paused: space starts c=1, w sweeps``)
    or what is happening (``quitting: …``); hidden when there is nothing to say."""

    def compose(self) -> ComposeResult:
        yield Body(id="hint-text")

    def watch_snapshot(self, hint: str | None) -> None:
        self.display = bool(hint)
        if hint:
            text = Text(f" {hint}", style=self.style("warning", bold=True), no_wrap=True)
            text.overflow = "ellipsis"
            self.query_one(Body).show(text)

    def repaint(self) -> None:
        self.watch_snapshot(self.snapshot)
