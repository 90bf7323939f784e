"""The header line: endpoint, model, backend, the load you set, state, elapsed."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.dashboard import HeaderView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

STATE_VARS = {
    "running": "success",
    "sweeping": "accent",
    "paused": "warning",
    "server down": "error",
}


class HeaderBar(Pane):
    def compose(self) -> ComposeResult:
        yield Body(id="header-text")

    def watch_snapshot(self, h: HeaderView) -> None:
        sep = (" · ", self.style("muted"))
        backend = " ".join(x for x in (h.backend, h.backend_version) if x) or "backend ?"
        inflight = f" ({h.inflight_requests} in flight)" if h.inflight_requests is not None else ""
        parts: list[tuple[str, str] | str] = [
            (" infmon ", self.style("primary", bold=True)),
            " ",
            (f.level(h.load_mode, h.load_level), "bold"),
            inflight,
            sep,
            (h.state, self.style(STATE_VARS.get(h.state, "foreground"), bold=True)),
            " ",
            f.clock(h.elapsed_s),
            sep,
            _crop(h.endpoint or "—", 60),
            sep,
            _crop(h.model or "model ?", 60),
            sep,
            _crop(backend, 40),
        ]
        if h.sweep:
            parts += [sep, (h.sweep, self.style("accent"))]
        if h.backoff:
            parts += [sep, (h.backoff, self.style("warning"))]
        if h.journal:
            parts += [sep, (h.journal, self.style("error"))]
        parts += [sep, (f"{h.failed} failed", self.style("error" if h.failed else "muted"))]
        if h.cancelled:
            parts += [" ", (f"{h.cancelled} cancelled", self.style("muted"))]
        if h.baseline_run is not None:  # --baseline RUN: what it is and what changed
            changes = "; ".join(h.baseline_changes) or "no config change seen"
            parts += [sep, (f"vs {_crop(h.baseline_run, 30)} ({changes})", self.style("accent"))]
        if h.baseline_step is not None:
            parts += [sep, (f"baseline step {h.baseline_step}", self.style("muted"))]
        self.query_one(Body).show(Text.assemble(*parts, no_wrap=True, overflow="ellipsis"))


def _crop(text: str, n: int) -> str:
    """At most ``n`` characters (a server's long model id must leave room for the rest)."""
    return text if len(text) <= n else text[: n - 1] + "…"
