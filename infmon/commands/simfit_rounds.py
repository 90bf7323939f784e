"""Rounds of one level (``bench --repeat``, read by ``sim --fit`` and by bench itself): each
level's figures over its rounds, the held-out levels against the mean of their rounds, and
the warning when rounds wandered, with whose the wander was (``infmon.sim.rounds``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from infmon.commands import CliError
from infmon.commands.simfit_read import read_session

if TYPE_CHECKING:
    from infmon.sim.forecast import HeldOut
    from infmon.sim.observation import Observation
    from infmon.sim.rounds import HeldLevel, Rounds


FIT_NOISE = (
    "Fitted costs and held-out errors carry that much noise: rerun in a quieter hour, with more "
    "--repeat, or on a host the server has to itself"
)
ROUNDS_NOISE = (
    "A comparison of these rounds carries that much noise: run more rounds, in a quieter hour, "
    "or on a host the server has to itself"
)


def wander_warning(obs: list[Observation], consequence: str) -> str | None:
    """When rounds of one level wandered (CV above ``WANDER_CV``): how far, whose the wander
    was (the server's pace or this client's reading, from vLLM's per-request timings), and
    ``consequence``; None when they held."""
    from infmon.sim.rounds import FIGURES, WANDER_CV, level_rounds, pace_gaps, whose_wander

    label = {f: name for f, name, *_ in FIGURES}
    rounds = level_rounds(obs)
    wandered = [r for r in rounds if r.wandered]
    if not wandered:
        return None
    worst = max(wandered, key=lambda r: r.cv)
    return (
        f"warning: rounds of one level wandered in {len(wandered)} of {len(rounds)} "
        f"figures (CV above {WANDER_CV:.1%}); worst c={worst.concurrency} "
        f"{label[worst.figure]}: {worst.spread:.2f}x between rounds (CV {worst.cv:.0%}). "
        f"{whose_wander(wandered, pace_gaps(obs))}. {consequence}"
    )


def session_wander(session_dir: Path) -> str | None:
    """``wander_warning`` for a bench session of repeated rounds (its closed-loop levels;
    None when they held, or the session cannot be read as rounds)."""
    try:
        obs, _ = read_session(session_dir, "auto", [])
    except CliError:
        return None
    return wander_warning(obs, ROUNDS_NOISE)


def render_rounds(obs: list[Observation], left: list[HeldOut]) -> list[str]:
    """Each level's rounds (the server's own pace between them), the held-out levels against
    the mean of their rounds, and a warning when rounds of one level wandered."""
    from infmon.sim.rounds import FIGURES, held_levels, level_rounds, wave_links, wave_sentence

    label = {f: (name, scale, unit) for f, name, scale, unit in FIGURES}
    rounds = level_rounds(obs)
    lines = []
    if rounds:
        lines.append(
            "rounds of one level (same load, same server: how far each figure moved; CV: "
            "sample spread; waves: requests sent together, on average):"
        )
        by: dict[tuple[str, int], list[Rounds]] = {}
        for r in rounds:
            by.setdefault((r.session, r.concurrency), []).append(r)
        for (session, c), rs in by.items():
            cells = []
            for r in rs:
                name, scale, unit = label[r.figure]
                each = ", ".join(f"{v * scale:.{0 if scale == 1 else 2}f}" for v in r.values)
                cells.append(f"{name} {each}{' ' + unit if unit else ''} (CV {r.cv:.0%})")
            waves = [o.arrival_wave for o in obs if (o.session, o.concurrency) == (session, c)]
            if all(math.isfinite(w) for w in waves):  # the closed loop's requests sent together
                cells.append("waves " + ", ".join(f"{w:.1f}" for w in waves))
            lines.append(f"  c={c} {session}: " + "  ".join(cells))
    held = held_levels(left)
    if held and any(h.rounds > 1 for h in held):
        lines += render_held_rounds(held, {f: name for f, (name, *_) in label.items()})
    if said := wave_sentence(wave_links(obs)):
        lines.append(said)
    if warning := wander_warning(obs, FIT_NOISE):
        lines.append(warning)
    return lines


def render_held_rounds(held: list[HeldLevel], label: Mapping[str, str]) -> list[str]:
    """The held-out levels against the mean of their rounds, each error beside how well those
    rounds know the mean (the half-width of its 95% interval, Student's t), and which misses
    are beyond it: a held-out error inside the rounds' own interval is not the model's to
    answer for, and a check tighter than the interval cannot tell a right forecast from a
    wrong one."""
    from infmon.model.compare.trial_stats import summarize

    lines = [
        "held out, against the mean of each level's rounds (±: that mean's 95% interval from "
        "the rounds' own spread):"
    ]
    beyond, widths = [], []
    for h in held:
        width = {f: summarize(v).half_width for f, v in h.values}
        cells = []
        for f, e in h.errors:
            w = width.get(f, math.nan)
            miss = math.isfinite(w) and abs(e) > w
            if math.isfinite(w):
                widths.append(w)
            if miss:
                beyond.append(f"c={h.concurrency} {label[f]} {e:+.0%} (±{w:.0%})")
            interval = f" (±{w:.0%}{', beyond' if miss else ''})" if math.isfinite(w) else ""
            cells.append(f"{label[f]} {e:+.1%}{interval}")
        lines.append(f"  c={h.concurrency} {h.session} ({h.rounds} rounds): " + "  ".join(cells))
    if beyond:
        lines.append(
            f"  beyond the rounds' own interval: {', '.join(beyond)}: the model missed there, "
            "not the hour"
        )
    covered = [inside for h in held for inside in h.inside_band().values()]
    if covered:
        lines.append(
            f"  the forecast's 95% band holds the mean of rounds in {sum(covered)} of "
            f"{len(covered)} figures"
        )
    if widths:
        lines.append(
            f"  the rounds know these means to ±{min(widths):.0%}-{max(widths):.0%}: a held-out "
            "error inside that is the rounds' noise, and a check tighter than it passes or fails "
            "a forecast by the hour (more --repeat rounds narrow it)"
        )
    return lines
