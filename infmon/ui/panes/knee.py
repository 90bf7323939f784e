"""The knee view: output tokens/s and p90 E2E latency against load, one point per held step."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult

from infmon.model.baseline import LevelComparison, delta_text
from infmon.model.dashboard import KneeView, StepPoint
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.widgets.chart import Chart, Line, VLine


class KneePane(Pane):
    def compose(self) -> ComposeResult:
        self.border_title = "Knee"
        yield Body(classes="numbers")
        yield Chart(classes="chart", id="knee-chart")

    def watch_snapshot(self, k: KneeView) -> None:
        muted = self.style("muted")
        knee = "not yet"
        if k.knee_level is not None:
            knee = (
                f"c={k.knee_level:g}" if k.knee_confirmed else f"≈ c={k.knee_level:g} (confirming)"
            )
        limit = f"c={k.slo_limit_level:g}" if k.slo_limit_level is not None else "—"
        text = Text.assemble(
            ("knee ", muted),
            (knee, self.style("knee", True)),
            ("  SLO limit ", muted),
            (limit, self.style("slo", True)),
        )
        if not f.missing(k.kv_fill_level) and not k.knee_limit:
            text.append(f"  KV fills c≈{f.num(k.kv_fill_level)}", self.style("kv-high"))
        if k.knee_limit:
            text.append(f"\nlimit: {k.knee_limit}", muted)
        if not k.steps:
            text.append("\nhold a level (or press w) for points", muted)
        room = max(0, (self.content_size.height or 4) - 1)
        if self.query_one(Chart).display:
            room = min(room, 1)
        for p in k.steps[-room:] if room else ():
            text.append(f"\nc={p.level:<4g} ", muted)
            text.append(f"{f.num(p.output_tokens_per_s)} tok/s", self.style("client"))
            text.append(f"  p90 {f.ms(p.p90_e2el_s)}", self.style("latency-p90"))
            self._versus(text, k, p)
        self.query_one(Body).show(text)
        chart = self.query_one(Chart)
        if chart.display:
            self._chart(chart, k)

    def _versus(self, text: Text, k: KneeView, p: StepPoint) -> None:
        """The baseline run at the same level: its tok/s and the delta, coloured by the noise
        test (better, worse, within noise); "not in baseline" when it did not run the level."""
        c = next(
            (c for c in k.baseline if c.level.value == p.level and c.level.mode == p.mode), None
        )
        if c is None:
            return
        d = c.get("tok_s")
        if not c.in_baseline or d is None:
            text.append("  (not in baseline)", self.style("muted"))
            return
        var = {True: "success", False: "error", None: "muted"}[d.better]
        text.append(f"  base {delta_text(d).split(' ', 1)[-1]}", self.style(var))
        if p is k.steps[-1]:  # the latest step: its latencies against the baseline's too
            self._latencies(text, c)

    def _latencies(self, text: Text, c: LevelComparison) -> None:
        """``vs base TTFT p90 +5%* TPOT p50 +222%* …``: as many as fit on one line."""
        room = (self.content_size.width or 36) - len("vs base")
        text.append("\nvs base", self.style("muted"))
        for key in ("ttft_p90", "tpot_p50", "itl_p50", "e2e_p90", "goodput"):
            d = c.get(key)
            if d is None or f.missing(d.delta.rel):
                continue
            cell = f" {d.metric.label.replace(' p50', '')} {delta_text(d).split(' ', 1)[-1]}"
            if len(cell) > room:
                break
            room -= len(cell)
            var = {True: "success", False: "error", None: "muted"}[d.better]
            text.append(cell, self.style(var))

    @staticmethod
    def _chart(chart: Chart, k: KneeView) -> None:
        """A line through the steps, a marker on each (the latest step at each level), the knee
        and the SLO limit as labelled verticals."""
        latest = sorted({p.level: p for p in k.steps}.values(), key=lambda p: p.level)
        xs = tuple(p.level for p in latest)
        vlines: list[VLine] = []
        if k.knee_level is not None:
            same = k.knee_level == k.slo_limit_level
            vlines.append((k.knee_level, "knee", "knee=SLO" if same else "knee"))
        if k.slo_limit_level is not None and k.slo_limit_level != k.knee_level:
            vlines.append((k.slo_limit_level, "slo", "SLO"))
        if xs and not f.missing(k.kv_fill_level) and min(xs) <= k.kv_fill_level <= 4 * max(xs):
            vlines.append((k.kv_fill_level, "kv-high", "KV"))
        chart.show(
            [
                Line("", tuple(p.output_tokens_per_s for p in latest), "client", xs=xs, points="●"),
                Line(
                    "",
                    tuple(p.p90_e2el_s for p in latest),
                    "latency-p90",
                    xs=xs,
                    points="◆",
                    right=True,
                ),
            ],
            vlines=vlines,
            xlabel="● tok/s  ◆ p90 E2E s  vs c",
            log_x=True,
        )
