"""Throughput over time: client output tokens/s next to the server's generation tokens/s."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline

from infmon.model.dashboard import ThroughputView
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Chart, Line


class ThroughputPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Throughput"
        yield Body(classes="numbers")
        yield Sparkline([], classes="spark", id="tp-spark")
        yield Chart(classes="chart", id="tp-chart")

    def watch_snapshot(self, t: ThroughputView) -> None:
        text = Text.assemble(
            ("out ", self.style("muted")),
            (f.num(t.client_output_tokens_per_s), self.style("client", True)),
            " tok/s  ",
            ("server ", self.style("muted")),
            (f.num(t.server_generation_tokens_per_s), self.style("server", True)),
            " tok/s\n",
            (f.num(t.requests_per_s, 1), "bold"),
            " req/s  ",
            ("goodput ", self.style("muted")),
            f.num(t.goodput_requests_per_s, 1),
            ("  errors ", self.style("muted")),
            f.pct(t.error_fraction),
        )
        if not f.missing(t.baseline_output_tokens_per_s) and not f.missing(
            t.client_output_tokens_per_s
        ):
            delta = (
                t.client_output_tokens_per_s / t.baseline_output_tokens_per_s - 1
                if t.baseline_output_tokens_per_s
                else float("nan")
            )
            text.append(
                f"  vs baseline {delta:+.0%}" if not f.missing(delta) else "", self.style("muted")
            )
        self.query_one(Body).show(text)
        self.query_one(Sparkline).data = [
            0.0 if f.missing(x) else x for x in t.client_series[-120:]
        ]
        chart = self.query_one(Chart)
        if chart.display:
            chart.show(
                [
                    Line("client tok/s", t.client_series, "client"),
                    Line("server tok/s", t.server_series, "server"),
                ],
                vlines=[(x, "knee") for x in t.mark_offsets],
                ylabel="tok/s",
                xlabel="seconds",
            )
