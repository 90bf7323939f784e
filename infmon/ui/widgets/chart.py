"""A line chart over time or over load, drawn with textual-plotext in the theme's colours."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.color import Color
from textual_plotext import PlotextPlot

from infmon.ui.format import nice_ticks, sig


@dataclass(frozen=True)
class Line:
    label: str
    ys: tuple[float, ...]
    color_var: str
    """A theme variable name (``client``, ``latency-p99``…)."""
    xs: tuple[float, ...] | None = None
    marker: str = "braille"
    points: str | None = None
    """Draw this character at every data point, over the line (e.g. one point per step)."""
    right: bool = False
    """Plot against the right-hand y axis."""


VLine = tuple[float, str] | tuple[float, str, str]
"""A vertical line: (x, theme colour variable) or (x, colour, label written at its top)."""


@dataclass(frozen=True)
class Axes:
    ylabel: str = ""
    xlabel: str = ""
    log_x: bool = False
    log_y: bool = False
    """Powers of ten on the y axis (latencies from sub-ms ITL to E2E seconds on one chart)."""
    floor_zero: bool = True
    """Linear y axes start at zero: figures are read against zero, no line goes below it."""
    ytick: Callable[[float], str] = sig


class Chart(PlotextPlot):
    """Redraws only when ``show`` is given different lines (the caller passes frozen data).
    Axes carry round ticks labelled with three significant digits (``format.sig``)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple | None = None

    def render(self) -> Any:
        """Draw the shown lines afresh at every render: ticks follow the room and the theme, and
        plotext's log scale must not be applied twice to one figure. If plotext fails on some
        corner of the data, show a note instead of taking the app down."""
        try:
            if self._shown is not None:
                self._draw(*self._shown)
            return super().render()
        except (ValueError, TypeError, ZeroDivisionError, IndexError, OverflowError) as exc:
            return Text(f"(chart unavailable: {type(exc).__name__})", style="dim")

    def rgb(self, var: str) -> tuple[int, int, int]:
        return Color.parse(self.app.theme_variables.get(var, "#888888")).rgb

    def show(
        self,
        lines: Sequence[Line],
        *,
        vlines: Sequence[VLine] = (),
        hline: tuple[float, str] | None = None,
        force: bool = False,
        axes: Axes | None = None,
        **kw: Any,
    ) -> None:
        """``axes`` (or its fields as keywords: ``ylabel``, ``log_x``…) say how to draw."""
        opts = axes or Axes(**kw)
        key = (tuple(lines), tuple(vlines), hline, opts)
        if key == self._shown and not force:
            return
        self._shown = key
        self.refresh()

    def _draw(
        self,
        lines: tuple[Line, ...],
        vlines: tuple[VLine, ...],
        hline: tuple[float, str] | None,
        opts: Axes,
    ) -> None:
        plt = self.plt
        plt.clear_data()
        plt.ylabel(opts.ylabel)
        plt.xlabel(opts.xlabel)
        series = [(line, _points(line, opts.log_y)) for line in lines]
        series = [(line, pts) for line, pts in series if pts]
        plt.xscale("log" if opts.log_x and series else "linear")  # not on an empty plot
        for side in ("left", "right"):
            used = any(line.right == (side == "right") for line, _ in series)
            plt.yscale("log" if opts.log_y and used else "linear", yside=side)
        ranges = self._axes(series, hline, opts)
        xs = [x for _, pts in series for x, _ in pts]
        if xs:  # first, so that the lines and their markers are drawn over them
            self._verticals(vlines, ranges, min(xs), max(xs), opts.log_x, opts.log_y)
        if hline is not None and series:
            plt.horizontal_line(hline[0], color=self.rgb(hline[1]))
        for line, pts in series:
            kwargs = {"label": line.label} if line.label else {}
            plt.plot(
                *zip(*pts, strict=True),
                color=self.rgb(line.color_var),
                marker=line.marker,
                yside="right" if line.right else "left",
                **kwargs,
            )
        for line, pts in series:  # every marker over every line
            if line.points:
                plt.scatter(
                    *zip(*pts, strict=True),
                    color=self.rgb(line.color_var),
                    marker=line.points,
                    yside="right" if line.right else "left",
                )

    def _verticals(
        self,
        vlines: tuple[VLine, ...],
        ranges: list[tuple[str, float, float]],
        lo: float,
        hi: float,
        log_x: bool,
        log_y: bool,
    ) -> None:
        plt = self.plt
        labelled = _spaced(vlines, lo, hi, (self.size.width or 40) - 8, log_x)
        rows = max(2, (self.size.height or 12) * 2)
        for i, (x, var, *label) in enumerate(vlines):
            if not lo <= x <= hi or not ranges:
                continue
            side, bottom, top = ranges[0]
            # a column of "│" drawn as data, so that markers drawn after it stay on top
            # (plotext's vertical_line is painted over everything)
            ys = _spread(bottom, top, rows, log_y)
            plt.scatter([x] * len(ys), ys, color=self.rgb(var), marker="│", yside=side)
            if label and i in labelled:
                align: Any = "left" if x <= lo else "right" if x >= hi else "center"
                plt.text(
                    label[0],
                    x,
                    top if labelled[i] % 2 == 0 else bottom,
                    color=self.rgb(var),
                    background=self.rgb("surface"),
                    yside=side,
                    alignment=align,
                )

    def _axes(
        self,
        series: list[tuple[Line, list[tuple[float, float]]]],
        hline: tuple[float, str] | None,
        opts: Axes,
    ) -> list[tuple[str, float, float]]:
        """Round ticks on both y axes (limits widened to them) and on x; returns the
        ``(side, lowest, highest)`` tick of each drawn y axis."""
        plt: Any = self.plt  # plotext's stubs type ``yside`` as a float
        height = self.size.height or 12
        tops = []
        for side in ("left", "right"):
            ys = [y for line, pts in series if line.right == (side == "right") for _, y in pts]
            if side == "left" and hline is not None and ys:
                ys.append(hline[0])
            if opts.floor_zero and not opts.log_y and ys and min(ys) > 0:
                ys.append(0.0)
            count = max(2, min(5, (height - 4) // 2))
            if not ys:
                continue
            ticks = decades(min(ys), max(ys)) if opts.log_y else nice_ticks(min(ys), max(ys), count)
            if ticks:
                if opts.log_y:  # plotext takes a log axis' limits as exponents
                    plt.ylim(math.log10(ticks[0]), math.log10(ticks[-1]), yside=side)
                else:
                    plt.ylim(ticks[0], ticks[-1], yside=side)
                plt.yticks(list(ticks), [opts.ytick(t) for t in ticks], yside=side)
                tops.append((side, ticks[0], ticks[-1]))
        xs = sorted({x for _, pts in series for x, _ in pts})
        if xs:
            width = self.size.width or 40
            if opts.log_x:
                step = max(1, math.ceil(len(xs) / max(2, width // 6)))
                xt = xs[::-1][::step][::-1]
                if xs[0] > 0 and xs[-1] > xs[0]:  # a margin: markers at the ends stay whole
                    a, b = math.log10(xs[0]), math.log10(xs[-1])
                    pad = (b - a) * 0.03
                    plt.xlim(a - pad, b + pad)  # exponents, as plotext takes a log axis
            else:
                xt = [
                    t
                    for t in nice_ticks(xs[0], xs[-1], max(2, width // 12))
                    if xs[0] <= t <= xs[-1]
                ]
            plt.xticks(xt, [_x_label(t, opts.log_x) for t in xt])
        return tops


def _x_label(x: float, levels: bool) -> str:
    """A tick: a load level whole and thousands separated (``1,024``, never ``1.02k``)."""
    return f"{x:,.0f}" if levels and float(x).is_integer() else sig(x)


def _spread(bottom: float, top: float, n: int, log: bool) -> list[float]:
    """``n`` values from ``bottom`` to ``top``, evenly spaced (in log space on a log axis)."""
    if log and bottom > 0 and top > 0:
        a, b = math.log10(bottom), math.log10(top)
        return [10 ** (a + (b - a) * k / (n - 1)) for k in range(n)]
    return [bottom + (top - bottom) * k / (n - 1) for k in range(n)]


def decades(lo: float, hi: float) -> tuple[float, ...]:
    """Powers of ten around ``lo``..``hi`` (both > 0)."""
    if lo <= 0 or hi <= 0:
        return ()
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if a == b:
        b += 1
    return tuple(10.0**k for k in range(a, b + 1))


def _points(line: Line, positive: bool = False) -> list[tuple[float, float]]:
    xs = line.xs if line.xs is not None else tuple(range(len(line.ys)))
    pts = [(x, y) for x, y in zip(xs, line.ys, strict=False) if not math.isnan(y)]
    return [(x, y) for x, y in pts if y > 0] if positive else pts


def _spaced(
    vlines: Sequence[VLine], lo: float, hi: float, columns: int, log_x: bool
) -> dict[int, int]:
    """Which labelled verticals keep their label (index → position among those kept): labels
    alternate top and bottom, and one is dropped when it would run into the previous label on
    its row."""
    if hi <= lo or columns <= 0:
        return {i: k for k, i in enumerate(i for i, v in enumerate(vlines) if len(v) > 2)}

    def col(x: float) -> float:
        if log_x and lo > 0 and x > 0:
            return (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo)) * columns
        return (x - lo) / (hi - lo) * columns

    kept: dict[int, int] = {}
    last_end = [-math.inf, -math.inf]
    for i, v in enumerate(vlines):
        if len(v) < 3 or not lo <= v[0] <= hi:
            continue
        row = len(kept) % 2
        c, width = col(v[0]), len(v[2])  # type: ignore[misc]
        if c - width / 2 > last_end[row] + 1:
            kept[i] = len(kept)
            last_end[row] = c + width / 2
    return kept


def step_vlines(
    marks: Sequence[tuple[int, str]], color_var: str = "muted", labelled: bool = True
) -> list[VLine]:
    """Step boundaries on an over-time chart: a muted vertical at each, labelled ``c=4``."""
    if not labelled:
        return [(float(x), color_var) for x, _ in marks]
    return [(float(x), color_var, label) for x, label in marks]


def sparkline_data(series: Sequence[float], last: int = 120) -> list[float]:
    """The series for a ``Sparkline``: nothing at all until there are two samples and one above
    zero (Textual draws a single value as solid blocks across the whole width)."""
    tail = list(series[-last:])
    known = [x for x in tail if not math.isnan(x)]
    if len(tail) < 2 or not known or max(known) <= 0:
        return []
    return [0.0 if math.isnan(x) else x for x in tail]
