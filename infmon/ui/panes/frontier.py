"""The load search's frontier as the knee pane shows it while ``w`` searches (``--search``): the
chart ``model/search/frontier.py`` lays out, the one bench prints, in the theme's colours
(``●`` meets the SLO in the success colour, ``×`` misses it in the error colour, the TPOT
bound in the SLO's colour). No arithmetic here: the model placed every character."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.app import RenderResult

from infmon.model.search.frontier import (
    BOUND,
    MEETS,
    MISSES,
    UNJUDGED,
    FrontierView,
    frontier_chart,
)
from infmon.ui.panes.base import Body, safe_text

FRONTIER_MIN_WIDTH = 40
FRONTIER_MIN_HEIGHT = 8
"""The frontier takes the knee chart's place beside the narrowed table only with at least this
much room (from 120×40); else the table's verdict lines list the probes
(``FrontierView.summary``)."""

GLYPH_VARS = {MEETS: "success", MISSES: "error", UNJUDGED: "muted"}


def frontier_text(view: FrontierView, width: int, height: int, style: Callable[[str], str]) -> Text:
    """The chart's title and key, then the chart, in ``width`` × ``height``; before the
    first probe has figures, the probes' line. ``style``: a theme variable → a style."""
    text = Text(f"frontier · {view.key(short=True)}", style=style("muted"))
    chart = frontier_chart(view, width, height - 1)
    if chart is None:
        text.append("\n" + view.summary, style=style("muted"))
        return text
    for row, line in enumerate(chart.lines):
        text.append("\n")
        text.append_text(_coloured(line, row == chart.bound_row, style))
    text.no_wrap, text.overflow = True, "crop"
    return text


def _coloured(line: str, bound: bool, style: Callable[[str], str]) -> Text:
    """One chart line: the y labels and axes muted, each point by its verdict, the bound's line
    in the SLO's colour (a point's level in the text's own colour)."""
    axis = line.find("┤")
    if axis < 0:  # the x axis and its ticks
        return Text(line, style=style("muted"))
    out = Text(line)
    out.stylize(style("muted"), 0, axis + 1)
    for i in range(axis + 1, len(line)):
        var = GLYPH_VARS.get(line[i]) or ("slo" if bound and line[i] == BOUND else None)
        if var is not None:
            out.stylize(style(var), i, i + 1)
    return out


class FrontierBody(Body):
    """The frontier in its own box: drawn at its own size and again at each of its resizes
    (the pane's figures only before the box has a size), so the chart fills the box line for
    line whatever the pane laid out around it. Before, the text was sized from the pane's
    figures when a snapshot came; a tmux test once saw the x axis' title missing at 120×40."""

    _drawn: tuple[FrontierView, Callable[[str], str]] | None = None
    _chart: tuple[int, int, Text] | None = None  # the last chart drawn: its width, height

    def draw(
        self, view: FrontierView, width: int, height: int, style: Callable[[str], str]
    ) -> None:
        """Show ``view``; ``width`` × ``height`` only until the box has a size of its own."""
        self._drawn, self._chart = (view, style), None
        self._redraw(width, height)

    def _text(self, width: int, height: int) -> Text:
        """The chart of the view drawn at ``width`` × ``height``, built once per view and size
        (``_redraw`` and ``render`` both ask for it at each paint)."""
        assert self._drawn is not None
        if self._chart is None or self._chart[:2] != (width, height):
            view, style = self._drawn
            self._chart = (width, height, safe_text(frontier_text(view, width, height, style)))
        return self._chart[2]

    def on_resize(self) -> None:
        if self._drawn is None:
            super().on_resize()
        else:
            self._redraw(0, 0)

    def render(self) -> RenderResult:
        """The chart at the box's size as it is painted: a layout change (the verdict line
        taking a row above the panes) paints the box at its new size before ``on_resize``
        runs, and the text drawn for the old box showed cut, its x axis's title lost (two CI
        runs on 4 Dec, at 120×40, the first frame after the verdict)."""
        size = self.content_size
        if self._drawn is None or not (size.width and size.height):
            return super().render()
        return self._text(size.width, size.height)

    def _redraw(self, width: int, height: int) -> None:
        size = self.content_size
        width, height = size.width or width, size.height or height
        if width and height:
            self.show(self._text(width, height))
