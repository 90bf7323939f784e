"""The frontier chart as text: each probe a point of tokens/s per user (what one stream sees,
1 / mean TPOT) against output tokens/s of all users, the SLO's TPOT bound as a line.

A point is ``●`` when its level meets the SLO (the search's monotone fit), ``×`` when it
misses it, with its level beside it where there is room; ``─`` marks the TPOT bound
(1 / TPOT: a user streaming slower than this line misses it). Plain text, so bench prints
it after every probe and the report keeps it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import Probe, fit_levels


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def frontier_chart(
    probes: Sequence[Probe],
    slo: SLO,
    attainment: float,
    width: int = 64,
    height: int = 12,
    unit: str = "c=",
) -> list[str]:
    """The chart's lines (empty when no probe has both figures)."""
    pts = [p for p in probes if math.isfinite(p.output_tok_s) and math.isfinite(p.tok_s_per_user)]
    if not pts:
        return []
    passes = {f.level: f.fitted >= attainment for f in fit_levels(probes)}
    line_y = 1.0 / slo.tpot_s if slo.tpot_s else math.nan
    xmax = max(p.output_tok_s for p in pts) * 1.05 or 1.0
    ymax = max([p.tok_s_per_user for p in pts] + ([line_y] if math.isfinite(line_y) else []))
    ymax = ymax * 1.1 or 1.0
    grid = [[" "] * width for _ in range(height)]

    def cell(x: float, y: float) -> tuple[int, int]:
        col = min(width - 1, max(0, round(x / xmax * (width - 1))))
        row = min(height - 1, max(0, round((1 - y / ymax) * (height - 1))))
        return row, col

    if math.isfinite(line_y):
        row, _ = cell(0.0, line_y)
        grid[row] = ["─"] * width
    placed = []
    for p in pts:
        row, col = cell(p.output_tok_s, p.tok_s_per_user)
        grid[row][col] = "●" if passes.get(p.level, False) else "×"
        placed.append((row, col, f"{unit}{p.level:g}"))
    taken = {(r, c) for r, c, _ in placed}
    for row, col, label in sorted(placed, key=lambda t: t[1]):
        for start in (col + 1, col - len(label)):  # right of the point, else left of it
            span = range(start, start + len(label))
            gap = span.stop if start > col else start - 1  # a blank beside the label
            free = [*span, gap]
            if start >= 0 and span.stop <= width and not any((row, c) in taken for c in free):
                grid[row][start : span.stop] = list(label)
                taken.update((row, c) for c in span)
                break
    ylab = [_fmt(ymax * (1 - r / (height - 1))) for r in range(height)]
    pad = max(len(s) for s in ylab)
    out = ["tok/s per user"]
    for r in range(height):
        shown = ylab[r] if r % 3 == 0 or r == height - 1 else ""
        out.append(f"{shown:>{pad}} ┤{''.join(grid[r])}")
    out.append(" " * pad + " └" + "─" * width)
    right = _fmt(xmax)
    out.append(" " * (pad + 2) + "0" + " " * (width - 1 - len(right)) + right)
    key = "● meets the SLO  × misses it"
    if math.isfinite(line_y):
        key += f"  ─ TPOT bound ({_fmt(line_y)} tok/s per user)"
    out.append(" " * (pad + 2) + "output tok/s, all users · " + key)
    return out
