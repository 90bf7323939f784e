"""Number formatting for the panes: a missing value prints as an em dash, never as 0."""

from __future__ import annotations

import math

MISSING = "—"

BLOCKS = " ▁▂▃▄▅▆▇█"


def missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | None, digits: int = 0) -> str:
    if missing(x):
        return MISSING
    return f"{x:,.{digits}f}"


def ms(x_s: float | None) -> str:
    """Seconds shown as ms below 10 s... compactly: 142 ms, 2.4 s."""
    if missing(x_s):
        return MISSING
    assert x_s is not None
    if x_s < 1.0:
        return f"{x_s * 1000:.0f} ms"
    return f"{x_s:.1f} s"


def ms_tight(x_s: float | None) -> str:
    """142ms, 2.4s: for rows that must fit 40 columns."""
    return ms(x_s).replace(" ", "")


def ms_bare(x_s: float | None) -> str:
    if missing(x_s):
        return MISSING
    assert x_s is not None
    return f"{x_s * 1000:.0f}" if x_s < 1 else f"{x_s:.1f}s"


def pct(x: float | None) -> str:
    """38%; below 10% one decimal (a KV cache at 0.7% is not empty)."""
    if missing(x):
        return MISSING
    assert x is not None
    return f"{x:.1%}" if 0 < abs(x) < 0.1 else f"{x:.0%}"


def si(x: float | None) -> str:
    """470k, 1.2M."""
    if missing(x):
        return MISSING
    assert x is not None
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g}{unit}"
    return f"{x:.0f}"


def sig(x: float | None) -> str:
    """Three significant digits, thousands as k/M/G: 2.59, 941, 53.9, 5.38k (axis labels)."""
    if missing(x):
        return MISSING
    assert x is not None
    if x == 0:
        return "0"
    if abs(x) >= 999.5:
        return si(x)
    return f"{x:.3g}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> tuple[float, ...]:
    """Round values (steps of 1, 2, 2.5 or 5 × 10ⁿ), about ``count`` intervals, spanning
    ``lo``..``hi``: axis ticks a reader can take in at a glance."""
    if missing(lo) or missing(hi) or not (math.isfinite(lo) and math.isfinite(hi)):
        return ()
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
    raw = (hi - lo) / max(1, count)
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return tuple(round(k * step, 12) for k in range(first, last + 1))


def clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def level(mode: str, value: float) -> str:
    return f"closed loop c={value:g}" if mode == "closed" else f"open loop {value:g} req/s"


def bar(fraction: float | None, width: int) -> tuple[str, str]:
    """A gauge: the filled and the empty part."""
    if missing(fraction) or width <= 0:
        return "", "░" * max(width, 0)
    assert fraction is not None
    filled = round(min(max(fraction, 0.0), 1.0) * width)
    return "█" * filled, "░" * (width - filled)


def blocks(values: tuple[float, ...]) -> str:
    """Per-position bars (values 0–1)."""
    out = []
    for v in values:
        out.append(" " if missing(v) else BLOCKS[min(8, max(0, round(v * 8)))])
    return "".join(out)
