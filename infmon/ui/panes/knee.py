"""The knee view: output tokens/s and p90 E2E latency against load, one point per held step."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.dashboard import KneeView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Chart, Line


class KneePane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Knee"
        yield Body(classes="numbers")
        yield Chart(classes="chart", id="knee-chart")

    def watch_snapshot(self, k: KneeView) -> None:
        muted = self.style("muted")
        knee = f"c={k.knee_level:g}" if k.knee_level is not None else "not yet"
        limit = f"c={k.slo_limit_level:g}" if k.slo_limit_level is not None else "—"
        text = Text.assemble(("knee ", muted), (knee, self.style("knee", True)),
                             ("  SLO limit ", muted), (limit, self.style("slo", True)))
        if not k.steps:
            text.append("\nhold a level (or press w) for points", muted)
        room = max(0, (self.content_size.height or 4) - 1)
        if self.query_one(Chart).display:
            room = min(room, 1)
        for p in k.steps[-room:] if room else ():
            text.append(f"\nc={p.level:<4g} ", muted)
            text.append(f"{f.num(p.output_tokens_per_s)} tok/s", self.style("client"))
            text.append(f"  p90 {f.ms(p.p90_e2el_s)}", self.style("latency-p90"))
        self.query_one(Body).show(text)
        chart = self.query_one(Chart)
        if chart.display:
            xs = tuple(p.level for p in k.steps)
            vlines = [(k.knee_level, "knee")] if k.knee_level is not None else []
            if k.slo_limit_level is not None:
                vlines.append((k.slo_limit_level, "slo"))
            chart.show([Line("", tuple(p.output_tokens_per_s for p in k.steps), "client", xs=xs,
                             scatter=True),
                        Line("", tuple(p.p90_e2el_s for p in k.steps), "latency-p90",
                             xs=xs, scatter=True, right=True)],
                       vlines=vlines, xlabel="concurrency (log): tok/s left, p90 E2E s right",
                       log_x=True)
