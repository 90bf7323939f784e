"""The knee of a concurrency sweep, and the highest concurrency that still meets the SLO.

Knee: the smallest concurrency past which output throughput grows by less than
``GROWTH_PER_DOUBLING`` (10 %) per doubling of concurrency while the median end-to-end latency
keeps rising, and throughput never regains that growth at higher concurrency. Steps are
``StepStats`` or their ``to_dict()`` form; the functions are pure.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

GROWTH_PER_DOUBLING = 0.10
SLO_ATTAINMENT = 0.9
"""A step meets the SLO when at least this fraction of its requests were good."""


def _point(step: Any) -> tuple[float, float, float, float] | None:
    """(concurrency, output tok/s, median E2EL ms, SLO attainment) of a step, or None."""
    d: Mapping[str, Any] = step.to_dict() if hasattr(step, "to_dict") else step
    c = d.get("concurrency")
    if c is None:
        return None
    tput = d.get("output_throughput_tok_s")
    p50 = (d.get("e2el_ms") or {}).get("p50")
    att = d.get("slo_attainment")
    return (
        float(c),
        math.nan if tput is None else float(tput),
        math.nan if p50 is None else float(p50),
        math.nan if att is None else float(att),
    )


def _points(steps: Sequence[Any]) -> list[tuple[float, float, float, float]]:
    pts = [p for p in (_point(s) for s in steps) if p is not None]
    return sorted(pts, key=lambda p: p[0])


def growth_per_doubling(c0: float, t0: float, c1: float, t1: float) -> float:
    """Throughput growth normalised to one doubling of concurrency (nan if undefined)."""
    if not (c1 > c0 > 0 and t0 > 0 and t1 >= 0):
        return math.nan
    if t1 == 0:
        return -1.0
    return float((t1 / t0) ** (1.0 / math.log2(c1 / c0)) - 1.0)


def find_knee(steps: Sequence[Any]) -> dict[str, Any] | None:
    """``{"concurrency", "reason"}`` of the knee, or None when throughput never flattens."""
    pts = [p for p in _points(steps) if not (math.isnan(p[1]) or math.isnan(p[2]))]
    flat = []
    for (c0, t0, l0, _), (c1, t1, l1, _) in itertools.pairwise(pts):
        g = growth_per_doubling(c0, t0, c1, t1)
        flat.append((not math.isnan(g) and g < GROWTH_PER_DOUBLING, g, l1 > l0, c0, c1, l0, l1))
    for i, (is_flat, g, rising, c0, c1, l0, l1) in enumerate(flat):
        if is_flat and rising and all(f[0] for f in flat[i:]):
            reason = (
                f"throughput {g:+.0%} per doubling from c={c0:g} to c={c1:g} "
                f"while median E2E latency rose {l0:.0f} → {l1:.0f} ms"
            )
            return {"concurrency": int(c0), "reason": reason}
    return None


def slo_max_concurrency(steps: Sequence[Any], attainment: float = SLO_ATTAINMENT) -> int | None:
    """Largest concurrency such that it and every lower step meet the SLO (None if none/no SLO)."""
    best: int | None = None
    for c, _, _, att in _points(steps):
        if math.isnan(att) or att < attainment:
            break
        best = int(c)
    return best
