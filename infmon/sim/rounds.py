"""How far the server's own pace wandered between rounds of one level (``bench --repeat``), and a
held-out level's forecast against the mean of its rounds.

A fit is judged by its error on levels it never saw, and that error cannot be read closer than
the measurement repeats: when two rounds of the same level, same load, same server, differ by
30%, a forecast 15% off may be the model or the hour. On the real vLLM here (CPU build, 2 cores
shared with the client) rounds of one level a minute apart differed up to 1.85x in TPOT on
4 Dec, and the server's own per-request TPOT moved with the client's (the server's pace, not the
client's reading). ``infmon sim --fit`` prints each level's rounds and says when they wander by
more than ``WANDER_CV``, and, where the session has the server's own per-request timings, whose
the wander was: the server's pace (its TPOT moved with the client's, round by round) or the
client's reading (the two drew apart). Pure: observations in, figures out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from infmon.sim.forecast import Band, Forecast, HeldOut
from infmon.sim.observation import Observation

WANDER_CV = 0.075
"""Rounds of one level whose coefficient of variation (sample) is above this wandered: half the
±15% a held-out check asks, so the wander alone could put a right forecast outside it."""
FIGURES = (
    ("tpot", "TPOT", 1e3, "ms"),
    ("ttft_p50", "TTFT p50", 1e3, "ms"),
    ("tok_s", "tok/s", 1.0, ""),
)
"""(figure, label, scale, unit): the server's pace (TPOT, output tokens/s) and the client's
median TTFT, each as a held-out check reads it."""
SAME_PACE = 0.03
"""A round whose client TPOT is within this of the server's own per-request TPOT (vLLM's
``--enable-per-request-metrics``) read the server's pace: on the real vLLM here the two were
within 1% in every round of 4 Dec's wandering session, over 1.85x of wander."""
MOSTLY_SERVER = 0.25
"""Where the client's TPOT drew further than ``SAME_PACE`` from the server's own in a round, the
wander is still mostly the server's pace when the server's own TPOT moved between rounds by at
least four times that gap (its largest round over its smallest, less one): the client's reading
then accounts for at most a fifth of what moved. A client on a loaded host can read one
round a few percent off the server's (a late first or last token: 40 ms over a 31-token
stream of 34 ms steps is 4%) while the server's own TPOT moves 2x; naming that wander the
client's would send the operator after the wrong machine."""


def figure_value(o: Observation, figure: str) -> float:
    """A round's figure as the fit reads it (TPOT: the server's own under ``--targets
    server``), or the server's own per-request TPOT beside the client's (``server_tpot``: NaN
    unless the session had both)."""
    return {
        "tpot": o.tpot_s,
        "ttft_p50": o.ttft_p50_s,
        "tok_s": o.output_tok_s,
        "server_tpot": o.server_tpot_s,
    }[figure]


@dataclass(frozen=True, slots=True)
class Rounds:
    """One figure of one level over its rounds (each a step of the session)."""

    session: str
    concurrency: int
    figure: str  # one of FIGURES' names
    values: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def cv(self) -> float:
        """Sample standard deviation over the mean (NaN with one round)."""
        if len(self.values) < 2 or self.mean <= 0:
            return math.nan
        return statistics.stdev(self.values) / self.mean

    @property
    def spread(self) -> float:
        """Largest round over smallest."""
        lo = min(self.values)
        return max(self.values) / lo if lo > 0 else math.nan

    @property
    def wandered(self) -> bool:
        return self.cv > WANDER_CV  # NaN: False


def _by_level(obs: Sequence[Observation]) -> list[tuple[str, int, list[int]]]:
    """(session, concurrency, indices into ``obs``) of each level (one load shape), in session
    and concurrency order."""
    by: dict[tuple[str, int, object], list[int]] = {}
    for i, o in enumerate(obs):
        by.setdefault((o.session, o.concurrency, o.shape), []).append(i)
    return [(s, c, idx) for (s, c, _), idx in sorted(by.items(), key=lambda kv: kv[0][:2])]


def round_index(obs: Sequence[Observation]) -> list[int]:
    """Each observation's round: its place among the steps of its level (session, concurrency,
    load shape), in the order the session ran them."""
    out = [0] * len(obs)
    for _, _, idx in _by_level(obs):
        for r, i in enumerate(idx):
            out[i] = r
    return out


def _measured(group: Sequence[Observation], figure: str) -> tuple[float, ...] | None:
    """The figure in every round of ``group`` (None: not measured in one of them)."""
    values = tuple(figure_value(o, figure) for o in group)
    return values if all(math.isfinite(v) and v > 0 for v in values) else None


def level_rounds(obs: Sequence[Observation]) -> list[Rounds]:
    """Each level's figures over its rounds, levels with two rounds or more, in session and
    concurrency order (a figure not measured in every round is left out)."""
    out = []
    for session, c, idx in _by_level(obs):
        if len(idx) < 2:
            continue
        for figure, *_ in FIGURES:
            values = _measured([obs[i] for i in idx], figure)
            if values is not None:
                out.append(Rounds(session, c, figure, values))
    return out


@dataclass(frozen=True, slots=True)
class PaceGap:
    """The client's TPOT against the server's own, round by round, at one level: when the two
    moved together the rounds' spread is the server's pace, not the client's reading."""

    session: str
    concurrency: int
    gaps: tuple[float, ...]  # client TPOT / server TPOT - 1, each round
    server_s: tuple[float, ...]  # the server's own per-request TPOT, each round

    @property
    def worst(self) -> float:
        """The largest gap, either way."""
        return max(abs(g) for g in self.gaps)

    @property
    def server_moved(self) -> float:
        """How far the server's own TPOT moved between rounds: largest over smallest, less one."""
        return max(self.server_s) / min(self.server_s) - 1

    @property
    def same_pace(self) -> bool:
        return self.worst <= SAME_PACE

    @property
    def mostly_server(self) -> bool:
        """The gap is small beside the server's own move (``MOSTLY_SERVER``)."""
        return self.worst <= MOSTLY_SERVER * self.server_moved


def pace_gaps(obs: Sequence[Observation]) -> list[PaceGap]:
    """Each level with two rounds or more whose every round carries the server's own TPOT, in
    session and concurrency order."""
    out = []
    for session, c, idx in _by_level(obs):
        group = [obs[i] for i in idx]
        client, server = _measured(group, "tpot"), _measured(group, "server_tpot")
        if len(idx) < 2 or client is None or server is None:
            continue
        gaps = tuple(a / b - 1 for a, b in zip(client, server, strict=True))
        out.append(PaceGap(session, c, gaps, server))
    return out


def whose_wander(wandered: Sequence[Rounds], gaps: Sequence[PaceGap]) -> str:
    """One sentence: whose the wander of ``wandered`` was, read from the gaps of those levels
    between the client's TPOT and the server's own (none: the session cannot tell)."""
    levels = {(r.session, r.concurrency) for r in wandered}
    mine = [g for g in gaps if (g.session, g.concurrency) in levels]
    if not mine or len(mine) < len(levels):
        return (
            "Without the client's TPOT and the server's own per-request TPOT side by side for "
            "every level that wandered (vLLM's --enable-per-request-metrics, and --targets both "
            "or auto) the session cannot tell the server's pace from this client's reading of it"
        )
    worst = max(mine, key=lambda g: g.worst)
    if worst.same_pace:
        return (
            "The server's own per-request TPOT moved with the client's in every round (within "
            f"{worst.worst:.1%}): the server's pace moved, not this client's reading of it "
            "(other load on a shared host, a server warming up)"
        )
    if all(g.same_pace or g.mostly_server for g in mine):
        least = min((g for g in mine if not g.same_pace), key=lambda g: g.server_moved)
        return (
            f"The server's own per-request TPOT moved {least.server_moved + 1:.2f}x between "
            f"rounds (c={least.concurrency}) and the client's drew apart from it by at most "
            f"{worst.worst:.1%} in a round (c={worst.concurrency}): the server's pace moved, and "
            "this client's reading added a little (a loaded client host: see the client "
            "self-check)"
        )
    return (
        f"The client's TPOT and the server's own drew apart by up to {worst.worst:.0%} in a "
        f"round (c={worst.concurrency}): part of the wander is this client's reading (a loaded "
        "client host: see the client self-check)"
    )


WAVE_LINK = 0.5
"""A level's TTFT p50 moved with its waves when their Pearson correlation over the rounds is at
least this (and the rounds' TTFT wandered): 0.74 over ten rounds of c=16 on the real vLLM here
(0.58 and 0.61 at c=16 and 8 in another ten-round run: the server's pace moves TTFT too)."""
WAVE_ROUNDS = 5
"""Rounds a level needs before its correlation is read: over three, one of 0.98 comes easily by
chance (a three-round run here read 0.98 at c=8 and -0.60 at c=16)."""


@dataclass(frozen=True, slots=True)
class WaveLink:
    """A level whose TTFT p50 wandered between rounds, beside its closed loop's wave size."""

    session: str
    concurrency: int
    waves: tuple[float, ...]
    ttft_p50_s: tuple[float, ...]

    @property
    def r(self) -> float:
        """Pearson correlation of the two over the rounds (NaN when either held still)."""
        w, t = self.waves, self.ttft_p50_s
        if len(w) < 3 or statistics.pstdev(w) == 0 or statistics.pstdev(t) == 0:
            return math.nan
        return statistics.correlation(w, t)


def wave_links(obs: Sequence[Observation]) -> list[WaveLink]:
    """Each level of ``WAVE_ROUNDS`` rounds or more whose TTFT p50 wandered and whose every
    round knows its wave size, in session and concurrency order."""
    out = []
    for session, c, idx in _by_level(obs):
        group = [obs[i] for i in idx]
        ttft = _measured(group, "ttft_p50")
        waves = tuple(o.arrival_wave for o in group)
        if len(idx) < WAVE_ROUNDS or ttft is None or not all(math.isfinite(w) for w in waves):
            continue
        if Rounds(session, c, "ttft_p50", ttft).wandered:
            out.append(WaveLink(session, c, waves, ttft))
    return out


def wave_sentence(links: Sequence[WaveLink]) -> str | None:
    """One sentence naming the levels whose TTFT p50 moved with their waves (None: none did)."""
    moved = [w for w in links if w.r >= WAVE_LINK]
    if not moved:
        return None
    cells = ", ".join(
        f"c={w.concurrency} r = {w.r:.2f} over {len(w.waves)} rounds (waves "
        f"{min(w.waves):.1f}-{max(w.waves):.1f} requests, TTFT p50 "
        f"{min(w.ttft_p50_s) * 1e3:.1f}-{max(w.ttft_p50_s) * 1e3:.1f} ms)"
        for w in moved
    )
    return (
        f"TTFT p50 moved with the closed loop's waves (requests sent together): {cells}. Alike "
        "requests in a closed loop fall into waves and out of them, and a request waits behind "
        "its wave; vary the output lengths (a dataset, no --ignore-eos) or drive --rate to "
        "measure TTFT free of them"
    )


@dataclass(frozen=True, slots=True)
class HeldLevel:
    """A held-out level: its forecast against the mean of its rounds, figure by figure."""

    session: str
    concurrency: int
    errors: tuple[tuple[str, float], ...]  # (figure, forecast / mean of rounds - 1)
    rounds: int
    values: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """(figure, its value in each round): how well the rounds know the level's mean."""
    bands: tuple[tuple[str, float], ...] = ()
    """(figure, the forecast's 95% band as a fraction of the forecast)."""

    def inside_band(self) -> dict[str, bool]:
        """Whether each figure's mean of rounds lies in the forecast's band."""
        band = dict(self.bands)
        return {f: abs(e) / (1.0 + e) <= band[f] for f, e in self.errors if f in band}


def forecast_bands(f: Forecast) -> dict[str, Band]:
    """A level's forecast as ``FIGURES`` name them (TPOT, TTFT p50, output tok/s)."""
    return {"tpot": f.tpot_s, "ttft_p50": f.ttft_p50_s, "tok_s": f.output_tok_s}


def forecast_figures(f: Forecast) -> dict[str, float]:
    """Their values alone."""
    return {name: band.value for name, band in forecast_bands(f).items()}


def held_levels(left: Sequence[HeldOut]) -> list[HeldLevel]:
    """Each held-out level's forecast (the same for every round: one shape) against the mean of
    its rounds: what the README's held-out figures and the real-server check read."""
    out = []
    for session, c, idx in _by_level([h.observation for h in left]):
        forecast = forecast_bands(left[idx[0]].forecast)
        errors, values, bands = [], [], []
        for figure, *_ in FIGURES:
            each = _measured([left[i].observation for i in idx], figure)
            if each is not None:
                band = forecast[figure]
                errors.append((figure, band.value / statistics.fmean(each) - 1))
                values.append((figure, each))
                bands.append((figure, band.half_width / band.value))
        out.append(HeldLevel(session, c, tuple(errors), len(idx), tuple(values), tuple(bands)))
    return out
