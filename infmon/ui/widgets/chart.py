"""A line chart over time or over load, drawn with textual-plotext in the theme's colours."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.color import Color
from textual_plotext import PlotextPlot


@dataclass(frozen=True)
class Line:
    label: str
    ys: tuple[float, ...]
    color_var: str
    """A theme variable name (``client``, ``latency-p99``…)."""
    xs: tuple[float, ...] | None = None
    marker: str = "braille"
    scatter: bool = False
    right: bool = False
    """Plot against the right-hand y axis."""


class Chart(PlotextPlot):
    """Redraws only when ``show`` is given different lines (the caller passes frozen data)."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple | None = None

    def render(self) -> Any:
        """Draw; if plotext fails on some corner of the data (it has a few: log scales of
        degenerate ranges), show a note instead of taking the app down."""
        try:
            return super().render()
        except (ValueError, TypeError, ZeroDivisionError, IndexError, OverflowError) as exc:
            return Text(f"(chart unavailable: {type(exc).__name__})", style="dim")

    def rgb(self, var: str) -> tuple[int, int, int]:
        return Color.parse(self.app.theme_variables.get(var, "#888888")).rgb

    def show(self, lines: Sequence[Line], *, vlines: Sequence[tuple[float, str]] = (),
             hline: tuple[float, str] | None = None, ylabel: str = "", xlabel: str = "",
             force: bool = False, log_x: bool = False) -> None:
        key = (tuple(lines), tuple(vlines), hline, ylabel, xlabel, log_x)
        if key == self._shown and not force:
            return
        self._shown = key
        plt = self.plt
        plt.clear_data()
        plt.ylabel(ylabel)
        plt.xlabel(xlabel)
        has_data = any(not math.isnan(y) for line in lines for y in line.ys)
        plt.xscale("log" if log_x and has_data else "linear")  # plotext cannot log an empty plot
        drawn = False
        for line in lines:
            xs = line.xs if line.xs is not None else tuple(range(len(line.ys)))
            pts = [(x, y) for x, y in zip(xs, line.ys, strict=False) if not math.isnan(y)]
            if not pts:
                continue
            draw = plt.scatter if line.scatter else plt.plot
            kwargs = {"label": line.label} if line.label else {}
            draw([p[0] for p in pts], [p[1] for p in pts], color=self.rgb(line.color_var),
                 marker=line.marker, yside="right" if line.right else "left", **kwargs)
            drawn = True
        for x, var in vlines:
            plt.vertical_line(x, color=self.rgb(var))
        if hline is not None and drawn:
            plt.horizontal_line(hline[0], color=self.rgb(hline[1]))
        self.refresh()
