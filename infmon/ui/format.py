"""Number formatting for the panes: a missing value prints as an em dash, never as 0."""

from __future__ import annotations

import math

from infmon.model.base.units import latency_text, sig3
from infmon.model.steps.span import CLOSED

MISSING = "—"

BLOCKS = " ▁▂▃▄▅▆▇█"


def missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | None, digits: int = 0) -> str:
    if missing(x):
        return MISSING
    return f"{x:,.{digits}f}"


def ms(x_s: float | None) -> str:
    """A latency with its unit, by the one rule (``infmon.model.base.units``): 0.42 ms, 18.5 ms,
    142 ms below a second, 2.43 s above."""
    return latency_text(x_s)


def ms_short(x_s: float | None) -> str:
    """A latency in five characters or so, by the same rule: ``<1ms``, ``17ms``, ``2.3s``."""
    if missing(x_s):
        return MISSING
    assert x_s is not None
    if x_s < 0.001:
        return "<1ms"
    if x_s < 1.0:
        return f"{x_s * 1e3:.0f}ms"
    return f"{x_s:.1f}s" if x_s < 10 else f"{x_s:,.0f}s"


def latency_unit(values_s: tuple[float, ...]) -> tuple[str, float]:
    """One unit for a row of latencies: ``s`` when the largest is a second or more, else ``ms``
    (so ``75 / 104 / 179 ms`` and ``2.4 / 2.7 / 12.0 s``, never a mix)."""
    known = [v for v in values_s if not missing(v)]
    return ("s", 1.0) if known and max(known) >= 1.0 else ("ms", 1000.0)


def in_unit(x_s: float | None, scale: float) -> str:
    """A latency in the row's unit, without the unit: 0.42, 18.5, 142, 2.4."""
    if missing(x_s):
        return MISSING
    assert x_s is not None
    return f"{x_s:,.1f}" if scale == 1.0 else sig3(x_s * scale)


def short(x_s: float | None, scale: float) -> str:
    """A latency in a row's unit in at most four characters or so: 0.041, 1.7, 17, 1,204."""
    if missing(x_s):
        return MISSING
    assert x_s is not None
    v = x_s * scale
    if v == 0:
        return "0"
    if abs(v) >= 10:
        return f"{v:,.0f}"
    return "<0.001" if abs(v) < 0.001 else f"{v:.2g}"


def signed_pct(x: float | None) -> str:
    """+12%, −3%, +0.4%."""
    if missing(x):
        return MISSING
    assert x is not None
    text = f"{x:+.1%}" if abs(x) < 0.1 else f"{x:+.0%}"
    return text.replace("-", "−")


def pct(x: float | None) -> str:
    """38%; below 10% one decimal (a KV cache at 0.7% is not empty)."""
    if missing(x):
        return MISSING
    assert x is not None
    return f"{x:.1%}" if 0 < abs(x) < 0.1 else f"{x:,.0%}"


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
    return f"closed loop c={value:g}" if mode == CLOSED else f"open loop {value:g} req/s"


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
