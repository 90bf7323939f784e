"""How ``infmon bench`` prints: a row per step within 100 columns (``--wide`` for more), a
status line while a step runs."""

from __future__ import annotations

import math
import sys

from infmon.commands.common import say
from infmon.engine.runner import EdgeRate, StepProgress, StepSpec
from infmon.model.records.stats import StepStats

NARROW = (
    ("step", 4),
    ("load", 9),
    ("done", 6),
    ("fail", 4),
    ("out tok/s", 10),
    ("server", 8),
    ("req/s", 7),
    ("TTFT p50/p99 ms", 15),
    ("TPOT ms", 7),
    ("E2E p50 s", 9),
)
"""Output tok/s is the client's; "server" the server's own generation rate, same window."""
WIDE = (("goodput", 8), ("ITL p50 ms", 10), ("achieved", 8))


def fmt(x: float | None, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if x is None or math.isnan(x) else f"{x * scale:,.{digits}f}"


def header(wide: bool) -> str:
    cols = NARROW + (WIDE if wide else ())
    return "  ".join(name.rjust(w) for name, w in cols)


def row(index: int, spec: StepSpec, s: StepStats, server: EdgeRate, wide: bool = False) -> str:
    cells = [
        str(index + 1),
        spec.label,
        str(s.completed),
        str(s.failed),
        fmt(s.output_throughput_tok_s),
        fmt(server.tokens_per_s, digits=0),
        fmt(s.request_throughput_req_s, digits=2),
        f"{fmt(s.ttft.p50, 1e3, 0)}/{fmt(s.ttft.p99, 1e3, 0)}",
        fmt(s.tpot.p50, 1e3),
        fmt(s.e2el.p50, digits=2),
    ]
    widths = [w for _, w in NARROW]
    if wide:
        cells += [
            fmt(s.goodput_req_s, digits=2),
            fmt(s.itl.p50, 1e3),
            fmt(s.achieved_concurrency),
        ]
        widths += [w for _, w in WIDE]
    return "  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True))


class Progress:
    """One live status line on a terminal; a line every 10 s otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self._last_line_s = -10.0
        self._shown = False

    def tick(self, p: StepProgress) -> None:
        text = (
            f"  step {p.index + 1}/{p.total} {p.spec.label} {p.phase} {p.elapsed_s:5.0f}s"
            f" · finished {p.finished} · failed {p.failed}"
        )
        if p.backoff:
            text += f" · {p.backoff}"
        if self.tty:
            say("\r" + text.ljust(78)[:78], err=True, end="")
            self._shown = True
        elif p.elapsed_s - self._last_line_s >= 10.0 or p.elapsed_s < self._last_line_s:
            say(text, err=True)
            self._last_line_s = p.elapsed_s

    def clear(self) -> None:
        if self._shown:
            say("\r" + " " * 78 + "\r", err=True, end="")
            self._shown = False
        self._last_line_s = -10.0
