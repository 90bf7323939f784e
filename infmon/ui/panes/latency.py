"""Latency: TTFT, TPOT, ITL and E2EL p50/p90/p99 over the live window, with the SLO."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Sparkline

from infmon.model.dashboard import LatencyView, Percentiles
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Chart, Line


class LatencyPane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Latency ms p50/p90/p99"
        yield Body(classes="numbers")
        yield Sparkline([], classes="spark", id="lat-spark")
        yield Chart(classes="chart", id="lat-chart")

    def _row(self, name: str, p: Percentiles, slo_s: float | None) -> list[tuple[str, str] | str]:
        row: list[tuple[str, str] | str] = [
            (f"{name:<5}", self.style("muted")),
            (f"{f.ms_bare(p.p50_s):>5}", self.style("latency-p50")),
            "/",
            (f"{f.ms_bare(p.p90_s):>5}", self.style("latency-p90")),
            "/",
            (f"{f.ms_bare(p.p99_s):>5}", self.style("latency-p99")),
        ]
        if slo_s is not None:
            ok = not f.missing(p.p90_s) and p.p90_s <= slo_s
            mark = "—" if f.missing(p.p90_s) else ("✓" if ok else "✗")
            row += [
                (f" {mark} ", self.style("success" if ok else "error")),
                (f"SLO {f.ms(slo_s)}", self.style("slo")),
            ]
        return [*row, "\n"]

    def watch_snapshot(self, lat: LatencyView) -> None:
        parts = (
            self._row("TTFT", lat.ttft, lat.slo.ttft_s)
            + self._row("TPOT", lat.tpot, lat.slo.tpot_s)
            + self._row("ITL", lat.itl, None)
            + self._row("E2E", lat.e2el, lat.slo.e2el_s)
        )
        text = Text.assemble(*parts[:-1])
        self.query_one(Body).show(text)
        self.query_one(Sparkline).data = [
            0.0 if f.missing(x) else x for x in lat.ttft_p90_series[-120:]
        ]
        chart = self.query_one(Chart)
        if chart.display:
            slo = lat.slo.ttft_s
            chart.show(
                [
                    Line("TTFT p90 s", lat.ttft_p90_series, "latency-p90"),
                    Line("E2E p90 s", lat.e2el_p90_series, "latency-p99"),
                ],
                hline=(slo, "slo") if slo is not None else None,
                ylabel="s",
                xlabel="seconds",
            )
