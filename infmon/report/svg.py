"""Small dependency-free SVG charts for the HTML report. Every label is sanitised and escaped
(``html_text``), so a chart is valid XML whatever a server named its model or metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from infmon.model.base.sanitize import html_text

Column = tuple[float | None, ...]
"""A series' values (None: a gap in the line)."""


def column(points: Sequence[Mapping[str, object]], key: str, scale: float = 1.0) -> Column:
    """A series' values: one figure of each point times ``scale`` (None where it is missing)."""
    return tuple(v * scale if isinstance(v := p.get(key), (int, float)) else None for p in points)


PALETTE = ("#2f6fdf", "#e0702a", "#2a9d5c", "#b03aa8", "#8a6d1f", "#d33f49")


@dataclass(frozen=True)
class Series:
    name: str
    xs: tuple[float, ...]
    ys: tuple[float | None, ...]
    points: bool = False
    right_axis: bool = False


@dataclass(frozen=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    marks: tuple[tuple[float, str], ...] = ()
    """Vertical lines with a label (operator marks, the knee, the SLO limit)."""
    log2_x: bool = False
    y2_label: str = ""
    x_from: float | None = None
    """The x axis starts here (a concurrency axis from c=1) whatever the first point is."""
    width: int = 760
    height: int = 260
    extra: dict[str, str] = field(default_factory=dict)


def _finite(v: float | None) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def _fmt(v: float) -> str:
    """A tick label: thousands separated (``1,024``), never ``1.02k``."""
    if abs(v) >= 100 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.3g}"


class _Frame:
    L, R, T, B = 56, 56, 28, 40

    def __init__(self, c: Chart, xs: list[float], ys: list[float], ys2: list[float]) -> None:
        self.c = c
        tx = (lambda x: math.log2(x)) if c.log2_x else (lambda x: x)
        self.tx = tx
        xv = [tx(x) for x in xs if _finite(x) and (x > 0 or not c.log2_x)] or [0.0, 1.0]
        self.x0, self.x1 = min(xv), max(xv)
        if self.x1 == self.x0:
            self.x0, self.x1 = self.x0 - 1, self.x1 + 1
        self.y1 = max([y for y in ys if _finite(y)] or [1.0]) * 1.08 or 1.0
        self.y2 = max([y for y in ys2 if _finite(y)] or [1.0]) * 1.08 or 1.0
        self.pw, self.ph = c.width - self.L - self.R, c.height - self.T - self.B

    def x(self, v: float) -> float:
        return self.L + (self.tx(v) - self.x0) / (self.x1 - self.x0) * self.pw

    def y(self, v: float, right: bool = False) -> float:
        top = self.y2 if right else self.y1
        return self.T + self.ph - v / top * self.ph


def _axes(f: _Frame) -> list[str]:
    c, out = f.c, []
    out.append(f'<rect x="{f.L}" y="{f.T}" width="{f.pw}" height="{f.ph}" class="plot"/>')
    for v in _ticks(0, f.y1):
        y = f.y(v)
        out.append(f'<line x1="{f.L}" x2="{f.L + f.pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>')
        out.append(
            f'<text x="{f.L - 4}" y="{y + 4:.1f}" class="tick" text-anchor="end">{_fmt(v)}</text>'
        )
    if any(s.right_axis for s in c.series):
        for v in _ticks(0, f.y2):
            out.append(
                f'<text x="{f.L + f.pw + 4}" y="{f.y(v, True) + 4:.1f}" class="tick">'
                f"{_fmt(v)}</text>"
            )
    if c.log2_x:
        xt = [2.0**i for i in range(math.floor(f.x0), math.ceil(f.x1) + 1)]
    else:
        xt = _ticks(f.x0, f.x1, 6)
    for v in xt:
        x = f.x(v)
        out.append(
            f'<text x="{x:.1f}" y="{f.T + f.ph + 16}" class="tick" text-anchor="middle">'
            f"{_fmt(v)}</text>"
        )
    out.append(
        f'<text x="{f.L + f.pw / 2}" y="{c.height - 6}" class="axis" '
        f'text-anchor="middle">{html_text(c.x_label)}</text>'
    )
    out.append(
        f'<text x="12" y="{f.T + f.ph / 2}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 12 {f.T + f.ph / 2})">{html_text(c.y_label)}</text>'
    )
    if c.y2_label:  # read bottom to top like the left title: the glyphs face inwards
        xr = c.width - 10
        out.append(
            f'<text x="{xr}" y="{f.T + f.ph / 2}" class="axis" text-anchor="middle" '
            f'transform="rotate(-90 {xr} {f.T + f.ph / 2})">{html_text(c.y2_label)}</text>'
        )
    return out


def _series(f: _Frame, s: Series, color: str) -> list[str]:
    out: list[str] = []
    path: list[tuple[float, float] | None] = []
    for x, y in zip(s.xs, s.ys, strict=False):
        if x is None or y is None or not (_finite(x) and _finite(y)) or (f.c.log2_x and x <= 0):
            path.append(None)
            continue
        path.append((f.x(x), f.y(y, s.right_axis)))
    d, pen = [], "M"
    for p in path:
        if p is None:
            pen = "M"
            continue
        d.append(f"{pen}{p[0]:.1f},{p[1]:.1f}")
        pen = "L"
    if d:
        out.append(f'<path d="{" ".join(d)}" fill="none" stroke="{color}" stroke-width="1.8"/>')
    if s.points:
        out.extend(
            f'<circle cx="{p[0]:.1f}" cy="{p[1]:.1f}" r="3" fill="{color}"/>'
            for p in path
            if p is not None
        )
    return out


def render(c: Chart) -> str:
    """The chart as an inline ``<svg>`` element."""
    ys = [y for s in c.series if not s.right_axis for y in s.ys if y is not None]
    ys2 = [y for s in c.series if s.right_axis for y in s.ys if y is not None]
    xs = [x for s in c.series for x in s.xs] + [m[0] for m in c.marks]
    xs += [c.x_from] if c.x_from is not None else []
    f = _Frame(c, xs, ys, ys2)
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{c.width}" '
        f'height="{c.height}" viewBox="0 0 {c.width} {c.height}" role="img">',
        f"<title>{html_text(c.title)}</title>",
        *_axes(f),
    ]
    for i, s in enumerate(c.series):
        body.extend(_series(f, s, PALETTE[i % len(PALETTE)]))
    for x, label in c.marks:
        if not _finite(x) or (c.log2_x and x <= 0):
            continue
        px = f.x(x)
        body.append(
            f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{f.T}" y2="{f.T + f.ph}" class="mark"/>'
        )
        body.append(
            f'<text x="{px + 3:.1f}" y="{f.T + 10}" class="marklabel">{html_text(label)}</text>'
        )
    lx = f.L
    for i, s in enumerate(c.series):
        color = PALETTE[i % len(PALETTE)]
        label = html_text(s.name + (" (right)" if s.right_axis else ""))
        body.append(
            f'<rect x="{lx}" y="8" width="10" height="10" fill="{color}"/>'
            f'<text x="{lx + 14}" y="17" class="legend">{label}</text>'
        )
        lx += 24 + 7 * len(s.name + (" (right)" if s.right_axis else ""))
    body.append("</svg>")
    return "\n".join(body)
