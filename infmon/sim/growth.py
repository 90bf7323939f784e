"""How a fitted server's costs grow with concurrency, read from the levels themselves: the
host's work per step with the running sequences, the API server's wait with the open streams
(a line, a slowing curve, or the rate form: ``infmon.sim.costmodel``), and the closed loop's
wave exponent. ``infmon.sim.fit`` holds these fixed while it solves for the costs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from infmon.sim.costmodel import box_cox
from infmon.sim.observation import Observation


def wave_exponent(obs: list[Observation]) -> float:
    """``b`` in waves of ``c ** b`` requests, by least squares on ``log w = b log c`` over the
    levels above one user whose waves were measured (a level of one user sends one at a time,
    so the line goes through there); 1.0 (every user together) when none were. On the real
    vLLM here the waves at c = 2, 4, 8, 16 were 1.0-1.1, 1.6-2.0, 1.6-2.8 and 1.6-4.9: b ≈ 0.43
    over all four, 0.26-0.35 from c = 2 and 4 alone (a fit that holds 8 and 16 out)."""
    pairs = [
        (math.log(o.concurrency), math.log(o.arrival_wave))
        for o in obs
        if o.concurrency >= 2 and math.isfinite(o.arrival_wave) and o.arrival_wave >= 1
    ]
    if not pairs:
        return 1.0
    b = sum(x * y for x, y in pairs) / sum(x * x for x, _ in pairs)
    return min(1.0, max(0.0, b))


@dataclass(frozen=True, slots=True)
class Growth:
    """How the host's work per step grows with the running sequences (``running ** seq``) and
    the API server's wait with the open streams (``box_cox(c, stream)``), and whence; or, with
    ``rate``, both with the tokens streamed per second (``costmodel``'s rate form)."""

    seq: float = 1.0
    stream: float = 1.0
    source: str = ""  # "" = not read from any levels (assumed)
    rate: bool = False


SHAPE_LEVELS = 4
SHAPE_SPAN = 8
"""A growth's shape is read from the levels only when there are four at least and the highest
is eight times the lowest: on the real vLLM here TPOT grew by 0.3 ms per sequence to c=4 and
half that past it, which levels up to 4 cannot show (their three points fit any curvature)."""
SHAPE_MARGIN = 0.75
"""A slowing growth is kept only when it cuts the line's relative scatter over the levels by a
quarter at least: on a simulator session (linear by construction) the line stays; on five
sweeps of the real vLLM here (c = 1-16) the curve cut it by 31-79% (TPOT exponents 0.4-0.75,
the API server's wait 0.1-0.55)."""
EXPONENTS = tuple(i / 20 for i in range(21))


def _curve_exponent(points: dict[int, list[float]]) -> float | None:
    """The exponent ``e`` of ``y = a + b x box_cox(c, e)`` (``e`` in 0-1) that fits the levels'
    mean figures best in relative terms, 1.0 unless it beats the line (``SHAPE_MARGIN``);
    None when the levels do not span enough to tell (``SHAPE_LEVELS``, ``SHAPE_SPAN``)."""
    means = {c: float(np.mean(v)) for c, v in points.items() if v and float(np.mean(v)) > 0}
    if len(means) < SHAPE_LEVELS or max(means) < SHAPE_SPAN * min(means):
        return None
    cs = sorted(means)
    y = np.array([means[c] for c in cs])

    def scatter(e: float) -> float:
        a = np.vstack([np.ones(len(cs)), [box_cox(c, e) for c in cs]]).T / y[:, None]
        coef, *_ = np.linalg.lstsq(a, np.ones(len(cs)), rcond=None)
        r = a @ coef - 1.0
        return float(np.sqrt(r @ r / len(cs)))

    scatters = {e: scatter(e) for e in EXPONENTS}
    best = min(scatters, key=scatters.__getitem__)
    return best if scatters[best] <= SHAPE_MARGIN * scatters[1.0] else 1.0


def growth_shape(obs: list[Observation], carried: Growth | None = None) -> Growth:
    """The growth's shapes from the levels' own curves: the server's TPOT (the client's where
    the server gave none) for the host's work per sequence, and the client's TTFT less the
    server's (the API server's part) for its wait per stream. A curve the levels do not span
    keeps ``carried``'s exponent, or the line."""
    tpot: dict[int, list[float]] = {}
    front: dict[int, list[float]] = {}
    for o in obs:
        if o.speculative_k:
            continue
        own = o.server_tpot_s if math.isfinite(o.server_tpot_s) else o.tpot_s
        tpot.setdefault(o.concurrency, []).append(own)
        if o.source == "both" and math.isfinite(o.server_ttft_s):
            front.setdefault(o.concurrency, []).append(o.ttft_s - o.server_ttft_s)
    seq, stream = _curve_exponent(tpot), _curve_exponent(front)
    old = carried or Growth()
    if seq is None and stream is None:
        return old
    span = f"fitted over c={min(tpot)}-{max(tpot)}"
    if seq is not None and stream is not None:
        source = span
    else:  # one curve read (the other had no server timings, or too few levels)
        read, other = (
            ("TPOT's", "the API server's") if stream is None else ("the API server's", "TPOT's")
        )
        source = f"{read} {span}; {other} {old.source or 'linear (assumed)'}"
    return Growth(old.seq if seq is None else seq, old.stream if stream is None else stream, source)


def fit_growth(
    obs: list[Observation], carried: Growth | None = None, rate: bool | None = None
) -> Growth:
    """The growth a fit of ``obs`` takes: the levels' own shape or ``carried``'s
    (``growth_shape``), else the rate form; ``rate`` True or False asks for the rate form or
    for the shape (the line where none is read or carried)."""
    growth = growth_shape(obs, carried)
    if rate or (rate is None and not growth.source):  # a shape nobody read: the rate form
        return Growth(rate=True, source=growth.source if growth.rate else "")
    return growth
