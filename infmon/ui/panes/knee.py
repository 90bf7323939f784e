"""The knee: one row per held step (step, c, tok/s, throughput growth per doubling, TTFT p90,
E2E p90), the knee row highlighted, revisits and steps too short to judge marked; beside it,
where there is room to read it, tok/s and p90 E2E against load (one point per level), or,
while ``w`` runs a ``--search`` and until the operator moves the load, the search's frontier
chart (``panes/frontier.py``) beside a narrowed table."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal

from infmon.model.compare.baseline import LevelComparison, delta_text
from infmon.model.live.dashboard import KneeView, StepPoint
from infmon.model.steps.span import RATE
from infmon.ui import format as f
from infmon.ui.panes.base import Body, Pane
from infmon.ui.panes.frontier import FRONTIER_MIN_HEIGHT, FRONTIER_MIN_WIDTH, FrontierBody
from infmon.ui.widgets.chart import Chart, Line, VLine

CHART_MIN_WIDTH = 44
CHART_MIN_HEIGHT = 12
"""The chart is drawn only with at least this much room beside the table."""


@dataclass(frozen=True)
class Column:
    title: str
    width: int
    rank: int
    """Dropped first when the pane is narrow: the highest rank."""


COLUMNS = (
    Column("step", 4, 3),
    Column("c", 5, 0),
    Column("tok/s", 7, 0),
    Column("gain/×2", 7, 2),
    Column("TTFT p90", 8, 4),
    Column("E2E p90", 8, 1),
    Column("", 9, 0),
)


def columns_for(width: int) -> tuple[Column, ...]:
    """The columns that fit ``width`` (one space between each), the lowest ranks kept."""
    kept = list(COLUMNS)
    for rank in sorted({c.rank for c in COLUMNS}, reverse=True):
        if sum(c.width + 1 for c in kept) - 1 <= width or rank == 0:
            break
        kept = [c for c in kept if c.rank != rank]
    return tuple(kept)


class KneePane(Pane):
    empty_hint = "hold a level (or press w) for points"
    """What the pane says before any step (a replay says its own)."""

    def compose(self) -> ComposeResult:
        self.border_title = "Knee"
        with Horizontal(id="knee-row"):
            yield Body(id="knee-table")
            yield Chart(id="knee-chart")
            yield FrontierBody(id="knee-frontier")

    def on_resize(self) -> None:
        self.repaint()

    def watch_snapshot(self, k: KneeView) -> None:
        width = self.content_size.width or 40
        height = self.content_size.height or 6
        compact = self.app.has_class("-compact")
        frontier = self.query_one("#knee-frontier", FrontierBody)
        frontier.display = (  # a search's frontier, in the chart's place beside a narrow table
            k.frontier is not None
            and not compact
            and width - sum(c.width + 1 for c in columns_for(0)) >= FRONTIER_MIN_WIDTH
            and height >= FRONTIER_MIN_HEIGHT
        )
        cols = columns_for(width - FRONTIER_MIN_WIDTH if frontier.display else width)
        table_width = sum(c.width + 1 for c in cols)
        chart = self.query_one(Chart)
        chart.display = (
            not compact
            and not frontier.display
            and width - table_width >= CHART_MIN_WIDTH
            and height >= CHART_MIN_HEIGHT
            and len({p.level for p in k.steps if p.counted}) >= 2
        )
        body = self.query_one("#knee-table", Body)
        body.styles.width = table_width if chart.display or frontier.display else "1fr"
        body.show(self._table(k, cols, height, summary=not frontier.display))
        if chart.display:
            self._chart(chart, k)
        if frontier.display and k.frontier is not None:
            frontier.draw(k.frontier, width - table_width - 1, height, self.style)

    def _verdict(self, k: KneeView, summary: bool) -> Text:
        muted = self.style("muted")
        if k.knee_level is None:
            knee = Text("not yet", style=muted)
        elif k.knee_confirmed:
            knee = Text(f"c={k.knee_level:g}", style=self.style("knee", True))
        else:
            knee = Text(f"≈ c={k.knee_level:g} (confirming)", style=self.style("knee", True))
        limit = k.slo_text or "—"
        text = Text.assemble(
            ("knee ", muted), knee, ("  SLO limit ", muted), (limit, self.style("slo", True))
        )
        width = self.content_size.width or 40
        if not f.missing(k.kv_fill_level) and not k.knee_limit:
            kv = f"KV fills c≈{f.num(k.kv_fill_level)}"
            sep = "  " if text.cell_len + 2 + len(kv) <= width else "\n"
            text.append(f"{sep}{kv}", self.style("kv-high"))
        if k.withdrawn:  # a knee shown earlier is said gone, with why
            text.append("\n")
            text.append_text(self._wrapped(Text(k.withdrawn, style=self.style("warning")), width))
        if k.knee_limit:  # a reason is wrapped, never cut
            text.append("\n")
            text.append_text(self._wrapped(Text(f"limit: {k.knee_limit}", style=muted), width))
        if summary and k.frontier is not None:  # no room for the frontier chart: its probes
            text.append("\n")
            text.append_text(self._wrapped(Text(k.frontier.summary, style=muted), width))
        return text

    def _wrapped(self, line: Text, width: int) -> Text:
        """``line`` folded at the pane's width (words kept whole)."""
        return Text("\n").join(line.wrap(self.app.console, max(10, width)))

    def _table(self, k: KneeView, cols: tuple[Column, ...], height: int, summary: bool) -> Text:
        text = self._verdict(k, summary)
        verdict_lines = len(text.plain.splitlines())
        if not k.steps:
            text.append(f"\n{self.empty_hint}", self.style("muted"))
            return text
        head = " ".join(f"{c.title:>{c.width}}" if c.title else "" for c in cols).rstrip()
        text.append("\n" + head, self.style("muted"))
        latest = self._against(k, k.steps[-1])
        room = max(1, height - 1 - verdict_lines - (latest is not None))
        for p in k.steps[-room:]:
            text.append("\n")
            text.append_text(self._row(p, k, cols))
            self._versus(text, k, p)
        if latest is not None:
            self._latencies(text, latest)
        text.no_wrap, text.overflow = True, "ellipsis"
        return text

    @staticmethod
    def _against(k: KneeView, p: StepPoint) -> LevelComparison | None:
        """The baseline run's comparison at ``p``'s level (None: no baseline run)."""
        return next(
            (c for c in k.baseline if c.level.value == p.level and c.level.mode == p.mode), None
        )

    def _versus(self, text: Text, k: KneeView, p: StepPoint) -> None:
        """The baseline run at the same level: the tok/s delta, coloured by the noise test
        (better, worse, within noise); "not in baseline" when it did not run the level."""
        c = self._against(k, p)
        if c is None:
            return
        d = c.get("tok_s")
        if not c.in_baseline or d is None:
            text.append("  (not in baseline)", self.style("muted"))
            return
        var = {True: "success", False: "error", None: "muted"}[d.better]
        text.append(f"  base {delta_text(d).split(' ', 1)[-1]}", self.style(var))

    def _latencies(self, text: Text, c: LevelComparison) -> None:
        """``vs base TTFT p90 +5%* TPOT p50 +222%* …`` for the latest level, as many as fit."""
        if not c.in_baseline:
            return
        room = (self.content_size.width or 36) - len("vs base")
        text.append("\nvs base", self.style("muted"))
        for key in ("ttft_p90", "tpot_p50", "itl_p50", "e2e_p90", "goodput"):
            d = c.get(key)
            if d is None or f.missing(d.delta.rel):
                continue
            cell = f" {d.metric.label.replace(' p50', '')} {delta_text(d).rsplit(' ', 1)[-1]}"
            if len(cell) > room:
                break
            room -= len(cell)
            var = {True: "success", False: "error", None: "muted"}[d.better]
            text.append(cell, self.style(var))

    def _row(self, p: StepPoint, k: KneeView, cols: tuple[Column, ...]) -> Text:
        is_knee = p.counted and k.knee_level is not None and p.level == k.knee_level
        cells = {
            "step": str(p.index),
            "c": f"{p.level:g}" if p.mode != RATE else f"{p.level:g}/s",
            "tok/s": f.num(p.output_tokens_per_s),
            "gain/×2": f.signed_pct(p.growth_per_doubling) if p.counted else "",
            "TTFT p90": f.ms(p.p90_ttft_s),
            "E2E p90": f.ms(p.p90_e2el_s),
            "": _flag(p, k, is_knee),
        }
        base = self.style("knee", True) if is_knee else ("" if p.counted else self.style("muted"))
        row = Text(style=base)
        for i, c in enumerate(cols):
            cell = cells[c.title]
            row.append(("" if i == 0 else " ") + (f"{cell:>{c.width}}" if c.title else cell))
        return row

    @staticmethod
    def _chart(chart: Chart, k: KneeView) -> None:
        """One point per level (the step the knee rule reads), tok/s on the left axis and p90
        E2E on the right, the knee and the SLO limit as labelled verticals."""
        latest = sorted((p for p in k.steps if p.counted), key=lambda p: p.level)
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
                Line(
                    "tok/s",
                    tuple(p.output_tokens_per_s for p in latest),
                    "client",
                    xs=xs,
                    points="●",
                ),
                Line(
                    "E2E p90 s",
                    tuple(p.p90_e2el_s for p in latest),
                    "latency-p90",
                    xs=xs,
                    points="◆",
                    right=True,
                ),
            ],
            vlines=vlines,
            xlabel="concurrency",
            log_x=True,
            floor_zero=True,
        )


def _flag(p: StepPoint, k: KneeView, is_knee: bool) -> str:
    if is_knee:
        return "◀ knee"
    if p.counted and k.slo_limit_level is not None and p.level == k.slo_limit_level:
        return "◀ SLO max"
    if p.revisit_of is not None:
        return f"↺ {p.revisit_of}"
    if not p.settled and not p.eligible:
        return "running"
    if not p.eligible:
        return "too short"
    if not p.counted:
        return "repeat"
    return ""
