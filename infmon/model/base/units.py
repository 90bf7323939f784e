"""One rule for a latency on screen and on paper: milliseconds under a second, seconds from
one second up, three significant figures, the unit said in the figure (``0.42 ms``,
``18.5 ms``, ``142 ms``, ``1.79 s``, ``12.3 s``), thousands separated (``1,204 s``)."""

from __future__ import annotations

import math

MISSING = "—"


def sig3(x: float) -> str:
    """Three significant digits, no exponent, thousands separated: 0.423, 18.5, 40, 1,204."""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    if abs(x) < 0.001:
        return "<0.001"
    return f"{x:.3g}"


def latency_text(x_s: float | None) -> str:
    """A latency with its unit by the one rule (a missing value is an em dash)."""
    if x_s is None or not math.isfinite(x_s):
        return MISSING
    if abs(x_s) < 1.0:
        return f"{sig3(x_s * 1000)} ms"
    return f"{sig3(x_s)} s"
