"""Throughput over time: client output tokens/s next to the server's generation tokens/s, the
steps (``c=4``) and marks as verticals; the baseline compared at its own level only."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline

from infmon.model.live.dashboard import BaselineStep, ThroughputView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Chart, Line, VLine, sparkline_data, step_vlines


class ThroughputPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Throughput"
        yield Body(classes="numbers")
        yield Sparkline([], classes="spark", id="tp-spark")
        yield Chart(classes="chart", id="tp-chart")

    def watch_snapshot(self, t: ThroughputView) -> None:
        muted = self.style("muted")
        goodput = (
            Text.assemble(" (", f.num(t.goodput_requests_per_s, 1), ("/s in SLO", muted), ")")
            if not f.missing(t.goodput_requests_per_s)
            else Text(" (no SLO set)", style=muted)
        )
        text = Text.assemble(
            ("out ", muted),
            (f.num(t.client_output_tokens_per_s), self.style("client", True)),
            " tok/s  ",
            ("server ", muted),
            (f.num(t.server_generation_tokens_per_s), self.style("server", True)),
            " tok/s\n",
            (f.num(t.requests_per_s, 1), "bold"),
            " req/s",
            goodput,
            ("  errors ", muted),
            f.pct(t.error_fraction),
            no_wrap=True,
            overflow="ellipsis",
        )
        if f.missing(t.client_output_tokens_per_s) and f.missing(t.requests_per_s):
            text = Text("no tokens received yet", style=muted)
        if t.baseline is not None:
            text.append("\n")
            text.append_text(self._baseline(t.baseline))
        self.query_one(Body).show(text)
        spark = self.query_one(Sparkline)
        spark.data = sparkline_data(t.client_series)
        spark.visible = bool(spark.data)
        chart = self.query_one(Chart)
        if chart.display:
            marks: list[VLine] = [*step_vlines(t.step_marks)]
            marks += [(float(x), "knee", "mark") for x in t.mark_offsets]
            marks.sort(key=lambda v: v[0])
            chart.show(
                [
                    Line("", t.client_series, "client"),
                    Line("", t.server_series, "server"),
                ],
                vlines=marks,
                ylabel="tok/s",
                xlabel="seconds",
            )

    def _baseline(self, b: BaselineStep) -> Text:
        muted = self.style("muted")
        where = f"baseline step {b.step} ({b.level_label}, {f.num(b.output_tokens_per_s)} tok/s)"
        if b.same_level and not f.missing(b.delta_fraction):
            return Text.assemble(
                ("vs ", muted),
                (where, muted),
                " ",
                (f.signed_pct(b.delta_fraction), "bold"),
            )
        return Text(f"{where}: compared at {b.level_label} only", style=muted)
