"""Latency: TTFT, TPOT, ITL and E2EL p50/p90/p99 over the live window, each row in one unit
(ms, or s once a value reaches a second), the SLO verdict with the rule it is judged by
(p90 within the target); over time, TTFT, E2E, TPOT and ITL p90 on one log-scale chart."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.reactive import var
from textual.widgets import Sparkline

from infmon.model.live.dashboard import LatencyView, Percentiles
from infmon.ui import format as f
from infmon.ui.panes.anatomy import TITLE as ANATOMY_TITLE
from infmon.ui.panes.anatomy import anatomy_text
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Axes, Chart, Line, sparkline_data, step_vlines

TITLE = "Latency p50 / p90 / p99"


class LatencyPane(Pane):
    show_anatomy = var(False)
    """``a``: the per-request anatomy instead of the percentiles (``ui/panes/anatomy.py``)."""

    def watch_show_anatomy(self, _on: bool) -> None:
        self.border_title = ANATOMY_TITLE if self.show_anatomy else TITLE
        self.set_class(self.show_anatomy, "-anatomy")
        self.repaint()

    def compose(self) -> ComposeResult:
        self.border_title = TITLE
        yield Body(classes="numbers")
        yield Sparkline([], classes="spark", id="lat-spark")
        yield Chart(classes="chart", id="lat-chart")

    def _row(
        self, name: str, p: Percentiles, slo_s: float | None, ok: bool | None
    ) -> list[tuple[str, str] | str]:
        unit, scale = f.latency_unit((p.p50_s, p.p90_s, p.p99_s))
        row: list[tuple[str, str] | str] = [
            (f"{name:<5}", self.style("muted")),
            (f"{f.in_unit(p.p50_s, scale):>5}", self.style("latency-p50")),
            "/",
            (f"{f.in_unit(p.p90_s, scale):>5}", self.style("latency-p90")),
            "/",
            (f"{f.in_unit(p.p99_s, scale):>5}", self.style("latency-p99")),
            (f" {unit:<2}", self.style("muted")),
        ]
        if slo_s is not None:
            mark = "—" if ok is None else ("✓" if ok else "✗")
            row += [
                (f" {mark} ", self.style("muted" if ok is None else "success" if ok else "error")),
                (f"p90≤{f.ms(slo_s).replace(' ', '')}", self.style("slo")),
            ]
        return [*row, "\n"]

    def watch_snapshot(self, lat: LatencyView) -> None:
        if self.show_anatomy:
            self.query_one(Body).show(anatomy_text(lat.anatomy, self.style))
            return
        slo = lat.slo
        if lat.e2el.count == 0 and lat.ttft.count == 0:
            text = Text("no request has finished yet", style=self.style("muted"))
        else:
            parts = (
                self._row("TTFT", lat.ttft, slo.ttft_s, lat.ttft_meets_slo)
                + self._row("TPOT", lat.tpot, slo.tpot_s, lat.tpot_meets_slo)
                + self._row("ITL", lat.itl, None, None)
                + self._row("E2E", lat.e2el, slo.e2el_s, lat.e2el_meets_slo)
            )
            text = Text.assemble(*parts[:-1], no_wrap=True, overflow="ellipsis")
            if self.query_one(Chart).display:
                text.append("\n")
                text.append_text(self._legend())
        self.query_one(Body).show(text)
        spark = self.query_one(Sparkline)
        spark.data = sparkline_data(lat.ttft_p90_series)
        spark.visible = bool(spark.data)
        self._charts(lat)

    def _charts(self, lat: LatencyView) -> None:
        """One chart, a log axis in ms: TTFT, E2E, TPOT and ITL p90 over time (ITL under a
        millisecond and E2E in seconds stay readable side by side); steps as verticals."""
        chart = self.query_one(Chart)
        if not chart.display:
            return
        slo = lat.slo.ttft_s
        chart.show(
            [
                Line("", _ms(lat.ttft_p90_series), "latency-p90"),
                Line("", _ms(lat.e2el_p90_series), "latency-p99"),
                Line("", _ms(lat.tpot_p90_series), "latency-p50"),
                Line("", _ms(lat.itl_p90_series), "client"),
            ],
            hline=(slo * 1e3, "slo") if slo is not None else None,
            vlines=step_vlines(lat.step_marks, labelled=False),
            axes=Axes(ylabel="p90, ms", xlabel="seconds", log_y=True, ytick=_ms_tick),
        )

    def _legend(self) -> Text:
        return Text.assemble(
            ("TTFT", self.style("latency-p90")),
            " ",
            ("E2E", self.style("latency-p99")),
            " ",
            ("TPOT", self.style("latency-p50")),
            " ",
            ("ITL", self.style("client")),
            (" p90 over time, log scale", self.style("muted")),
        )

    def on_resize(self) -> None:
        self.repaint()


def _ms(series: tuple[float, ...]) -> tuple[float, ...]:
    """The series in the chart's unit (display only: ms from seconds)."""
    return tuple(x * 1e3 for x in series)


def _ms_tick(x_ms: float) -> str:
    """Axis labels for a log ms axis: 0.1, 1, 10, 100, 1s, 10s."""
    return f"{x_ms / 1e3:g}s" if x_ms >= 1e3 else f"{x_ms:g}"
