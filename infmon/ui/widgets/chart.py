"""A line chart over time or over load, drawn with textual-plotext in the theme's colours."""

from __future__ import annotations

import math
from collections.abc import Sequence
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
        ylabel: str = "",
        xlabel: str = "",
        force: bool = False,
        log_x: bool = False,
    ) -> None:
        key = (tuple(lines), tuple(vlines), hline, ylabel, xlabel, log_x)
        if key == self._shown and not force:
            return
        self._shown = key
        self.refresh()

    def _draw(
        self,
        lines: tuple[Line, ...],
        vlines: tuple[VLine, ...],
        hline: tuple[float, str] | None,
        ylabel: str,
        xlabel: str,
        log_x: bool,
    ) -> None:
        plt = self.plt
        plt.clear_data()
        plt.ylabel(ylabel)
        plt.xlabel(xlabel)
        series = [(line, _points(line)) for line in lines]
        series = [(line, pts) for line, pts in series if pts]
        plt.xscale("log" if log_x and series else "linear")  # plotext cannot log an empty plot
        for line, pts in series:
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            side = "right" if line.right else "left"
            kwargs = {"label": line.label} if line.label else {}
            plt.plot(
                xs, ys, color=self.rgb(line.color_var), marker=line.marker, yside=side, **kwargs
            )
            if line.points:
                plt.scatter(xs, ys, color=self.rgb(line.color_var), marker=line.points, yside=side)
        ranges = self._axes(series, hline, log_x)
        xs = [x for _, pts in series for x, _ in pts]
        for i, (x, var, *label) in enumerate(vlines):
            plt.vertical_line(x, color=self.rgb(var))
            if label and ranges:
                side, bottom, top = ranges[0]
                align = "left" if x <= min(xs) else "right" if x >= max(xs) else "center"
                plt.text(
                    label[0],
                    x,
                    top if i % 2 == 0 else bottom,
                    color=self.rgb(var),
                    yside=side,
                    alignment=align,
                )
        if hline is not None and series:
            plt.horizontal_line(hline[0], color=self.rgb(hline[1]))

    def _axes(
        self,
        series: list[tuple[Line, list[tuple[float, float]]]],
        hline: tuple[float, str] | None,
        log_x: bool,
    ) -> list[tuple[str, float, float]]:
        """Round ticks on both y axes (limits widened to them) and on x; returns the
        ``(side, lowest, highest)`` tick of each drawn y axis."""
        plt, height = self.plt, self.size.height or 12
        tops = []
        for side in ("left", "right"):
            ys = [y for line, pts in series if line.right == (side == "right") for _, y in pts]
            if side == "left" and hline is not None and ys:
                ys.append(hline[0])
            ticks = nice_ticks(min(ys), max(ys), max(2, min(5, (height - 4) // 2))) if ys else ()
            if ticks:
                plt.ylim(ticks[0], ticks[-1], yside=side)
                plt.yticks(list(ticks), [sig(t) for t in ticks], yside=side)
                tops.append((side, ticks[0], ticks[-1]))
        xs = sorted({x for _, pts in series for x, _ in pts})
        if xs:
            if log_x:
                step = max(1, math.ceil(len(xs) / max(2, (self.size.width or 40) // 6)))
                xt = xs[::-1][::step][::-1]
            else:
                xt = [
                    t
                    for t in nice_ticks(xs[0], xs[-1], max(2, (self.size.width or 40) // 12))
                    if xs[0] <= t <= xs[-1]
                ]
            plt.xticks(xt, [sig(t) for t in xt])
        return tops


def _points(line: Line) -> list[tuple[float, float]]:
    xs = line.xs if line.xs is not None else tuple(range(len(line.ys)))
    return [(x, y) for x, y in zip(xs, line.ys, strict=False) if not math.isnan(y)]
