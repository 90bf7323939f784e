"""GPUs: per GPU (or MIG instance) the SM / graphics-engine activity, DRAM activity, memory,
power against its limit, SM clock and throttle reasons, and who else holds it. Shown when there
is GPU data, or a GPU source was asked for (then "no GPU data", quietly, until there is)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.server.gpu_state import GpuRow, GpuView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane

ROOMY = 2
"""Up to this many GPUs get several lines each; more get one line each."""


def _gib(x: float) -> str:
    return f.MISSING if f.missing(x) else f"{x:.1f}"


class GpuPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "GPU"
        yield Body()

    def watch_snapshot(self, v: GpuView) -> None:
        self.display = v.shown
        if not v.shown:
            return
        muted = self.style("muted")
        if not v.rows:
            note = v.note or "no GPU data yet"
            self.query_one(Body).show(Text(note, style=muted))
            return
        roomy = len(v.rows) <= ROOMY
        parts = [self._roomy(r) if roomy else self._line(r) for r in v.rows]
        text = Text("\n").join(parts)
        text.no_wrap, text.overflow = True, "ellipsis"
        self.query_one(Body).show(text)

    def _activity(self, r: GpuRow, width: int) -> Text:
        muted = self.style("muted")
        filled, empty = f.bar(r.activity, width)
        busy = not f.missing(r.activity) and r.activity >= 0.9
        return Text.assemble(
            (f"{r.activity_kind} ", muted),
            (filled, self.style("kv-high" if busy else "kv-low")),
            (empty, muted),
            (f" {f.pct(r.activity):>4}", "bold"),
            (f"  {r.dram_kind} ", muted),
            (f.pct(r.dram), "bold"),
        )

    def _roomy(self, r: GpuRow) -> Text:
        muted, warn = self.style("muted"), self.style("warning", True)
        width = max(6, min(16, (self.content_size.width or 30) - 22))
        head = Text.assemble((r.label, "bold"), (f" {r.name}" if r.name else "", muted))
        mem = Text.assemble(
            ("mem ", muted),
            (f"{_gib(r.mem_used_gib)}/{_gib(r.mem_total_gib)} GiB", "bold"),
            ("  ", muted),
            (f.num(r.power_w), "bold"),
            ("" if f.missing(r.power_limit_w) else f"/{f.num(r.power_limit_w)}", muted),
            (" W", muted),
        )
        clock = Text.assemble((f.num(r.sm_clock_mhz), "bold"), (" MHz", muted))
        if not f.missing(r.sm_clock_peak_mhz) and r.sm_clock_peak_mhz > r.sm_clock_mhz:
            clock.append(f" of {f.num(r.sm_clock_peak_mhz)}", muted)
        if r.throttle:
            clock.append(f"  throttled: {', '.join(r.throttle)}", warn)
        lines = [head, self._activity(r, width), mem, clock]
        for h in r.holders:
            style = muted if h.serving else warn
            who = "server" if h.serving else "other"
            sm = "" if f.missing(h.sm_percent) else f" SM {h.sm_percent:.0f}%"
            mem_h = "" if f.missing(h.mem_gib) else f" {h.mem_gib:.1f}G"
            lines.append(Text(f"{who}{mem_h}{sm} {h.label}", style=style))
        return Text("\n").join(lines)

    def _line(self, r: GpuRow) -> Text:
        muted, warn = self.style("muted"), self.style("warning", True)
        line = Text.assemble((f"{r.label} ", "bold"), self._activity(r, 6))
        line.append(f"  {_gib(r.mem_used_gib)}/{_gib(r.mem_total_gib)}G", muted)
        line.append(f" {f.num(r.power_w)}W", muted)
        if r.throttle:
            line.append(" throttled", warn)
        if r.others:
            line.append(f" +{len(r.others)} other", warn)
        return line

    def on_resize(self) -> None:
        self.repaint()
