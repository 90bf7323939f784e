"""The frontier chart: each probe of a search a point of tokens/s per user (what one stream
sees, 1 / mean TPOT) against output tokens/s of all users, the SLO's TPOT bound as a line.

Why this chart: a server trades one user's speed for the total; the SLO's TPOT bound caps
the per-user rate (a TPOT of 50 ms is 20 tok/s per user), so the frontier is the highest total
whose users stay above that line. A point is ``●`` when its level meets the SLO (the search's
monotone fit), ``×`` when it misses it (``○``: no SLO to judge by), with its level beside it
where there is room; ``─`` marks the TPOT bound. Plain text laid out here, in ``model/``, so
bench prints the same chart the monitor's knee pane shows live, and both are tested as text.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import Probe, fit_levels

NAN = math.nan
MEETS, MISSES, UNJUDGED, BOUND = "●", "×", "○", "─"
MIN_WIDTH, MIN_HEIGHT = 24, 5
"""A box smaller than this draws no chart (the summary line says the probes instead)."""
SEARCHES_FOR = {"slo": "the SLO frontier", "goodput": "peak goodput", "knee": "the knee"}
"""What a search's goal finds, as the hint and the help say it."""
X_TITLE = "output tok/s, all users"
Y_TITLE = "tok/s per user"


@dataclass(frozen=True, slots=True)
class FrontierPoint:
    """One probe: its level's label, where it lies, and whether its level meets the SLO."""

    label: str
    """``c=16`` (or ``2.5/s`` for a rate)."""
    output_tok_s: float
    tok_s_per_user: float
    meets: bool | None
    """By the monotone fit of every probe so far; None when there is no SLO."""


@dataclass(frozen=True, slots=True)
class FrontierView:
    """A search's frontier as the knee pane and bench draw it (one per probe so far)."""

    goal: str
    points: tuple[FrontierPoint, ...] = ()
    bound_tok_s_per_user: float = NAN
    """1 / the SLO's TPOT bound (nan: the SLO bounds no TPOT)."""
    verdict: str = ""
    """Why the search ended (its verdict line, or that it was stopped); "" while it runs."""

    @property
    def summary(self) -> str:
        """The probes in one line for a pane with no room for the chart:
        ``search slo: c=16● c=32● c=64× c=48●``."""
        marks = " ".join(f"{p.label}{_glyph(p.meets)}" for p in self.points)
        return f"search {self.goal}: {marks or 'measuring the first probe'}"

    def key(self, short: bool = False) -> str:
        """What the glyphs mean (``short``: for a pane)."""
        if short:
            key = f"{MEETS} meets  {MISSES} misses"
        else:
            key = f"{MEETS} meets the SLO  {MISSES} misses it"
        if math.isfinite(self.bound_tok_s_per_user):
            rate = _fmt(self.bound_tok_s_per_user)
            key += (
                f"  {BOUND} TPOT {rate}/s" if short else f"  {BOUND} TPOT bound ({rate} {Y_TITLE})"
            )
        return key


def frontier_view(
    goal: str,
    probes: Sequence[Probe],
    slo: SLO,
    attainment: float,
    unit: str = "c=",
    verdict: str = "",
) -> FrontierView:
    """The probes as points, each judged by the monotone fit over all of them."""
    judged = not slo.empty
    passes = {f.level: f.fitted >= attainment for f in fit_levels(probes)}
    points = tuple(
        FrontierPoint(
            f"{unit}{p.level:g}" if unit else f"{p.level:g}/s",
            p.output_tok_s,
            p.tok_s_per_user,
            passes.get(p.level, False) if judged else None,
        )
        for p in probes
    )
    bound = 1.0 / slo.tpot_s if slo.tpot_s else NAN
    return FrontierView(goal, points, bound, verdict)


@dataclass(frozen=True, slots=True)
class FrontierChart:
    """The chart's lines (the plot rows with their y labels, the x axis, its ticks and title)."""

    lines: tuple[str, ...]
    bound_row: int | None
    """The line the TPOT bound is drawn on (a pane colours it), None when none is drawn."""


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _glyph(meets: bool | None) -> str:
    return UNJUDGED if meets is None else MEETS if meets else MISSES


def frontier_chart(view: FrontierView, width: int, height: int) -> FrontierChart | None:
    """The chart in a box ``width`` × ``height`` characters (None: no point has both figures,
    or the box is too small to read)."""
    pts = [
        p for p in view.points if math.isfinite(p.output_tok_s) and math.isfinite(p.tok_s_per_user)
    ]
    if not pts or width < MIN_WIDTH or height < MIN_HEIGHT:
        return None
    rows = height - 2  # the x axis and its ticks below the plot
    line_y = view.bound_tok_s_per_user
    xmax = max(p.output_tok_s for p in pts) * 1.05 or 1.0
    ymax = max([p.tok_s_per_user for p in pts] + ([line_y] if math.isfinite(line_y) else []))
    ymax = ymax * 1.1 or 1.0
    ylab = [_fmt(ymax * (1 - r / (rows - 1))) for r in range(rows)]
    pad = max(len(s) for s in ylab)
    cols = width - pad - 2
    grid = [[" "] * cols for _ in range(rows)]

    def cell(x: float, y: float) -> tuple[int, int]:
        col = min(cols - 1, max(0, round(x / xmax * (cols - 1))))
        row = min(rows - 1, max(0, round((1 - y / ymax) * (rows - 1))))
        return row, col

    bound_row = cell(0.0, line_y)[0] if math.isfinite(line_y) else None
    if bound_row is not None:
        grid[bound_row] = [BOUND] * cols
    placed = []
    for p in pts:
        row, col = cell(p.output_tok_s, p.tok_s_per_user)
        glyph = _glyph(p.meets)
        col = _free(grid[row], col, glyph)
        grid[row][col] = glyph
        placed.append((row, col, p.label))
    _label(grid, placed)
    step = 3 if rows > 6 else 2
    out = [
        f"{ylab[r] if r % step == 0 or r == rows - 1 else '':>{pad}} ┤{''.join(grid[r])}"
        for r in range(rows)
    ]
    out.append(" " * pad + " └" + "─" * cols)
    out.append(" " * (pad + 2) + _ticks(cols, _fmt(xmax)))
    return FrontierChart(tuple(out), bound_row)


def _free(row: list[str], col: int, glyph: str) -> int:
    """``col``, or the nearest column of the row (within 3) when ``col`` holds a point of the
    other verdict: a text cell is coarser than the data, and a point that meets the SLO must
    never hide one that misses it (nor the reverse). Same verdicts share a cell."""
    for shift in (0, 1, -1, 2, -2, 3, -3):
        c = col + shift
        if 0 <= c < len(row) and row[c] not in _POINTS - {glyph}:
            return c
    return col


_POINTS = {MEETS, MISSES, UNJUDGED}


def _label(grid: list[list[str]], placed: list[tuple[int, int, str]]) -> None:
    """Each point's level right of it, else left of it, where it takes no other's place."""
    cols = len(grid[0])
    taken = {(r, c) for r, c, _ in placed}
    for row, col, label in sorted(placed, key=lambda t: t[1]):
        for start in (col + 1, col - len(label)):
            span = range(start, start + len(label))
            gap = span.stop if start > col else start - 1  # a blank beside the label
            if (
                start >= 0
                and span.stop <= cols
                and not any((row, c) in taken for c in [*span, gap])
            ):
                grid[row][start : span.stop] = list(label)
                taken.update((row, c) for c in span)
                break


def _ticks(cols: int, right: str) -> str:
    """``0    output tok/s, all users    3,120`` across the plot's width."""
    inner = cols - 1 - len(right)
    for title in (X_TITLE, "total tok/s", ""):
        if len(title) + 2 <= inner:
            left = (inner - len(title)) // 2
            return "0" + " " * left + title + " " * (inner - left - len(title)) + right
    return "0" + " " * max(0, inner) + right
