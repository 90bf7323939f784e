"""``--repeat N`` and ``--until-ci PCT`` (bench; method passes them on): the options, the stop
rule after each round, and the trials table and ``trials.json`` at the end."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.journal.safefile import write_text_atomic
from infmon.model.compare.trial_figures import (
    FIGURE_NAMES,
    SLO_FIGURES,
    STOP_FIGURE,
    LevelTrials,
    all_tight,
    loose,
    trials_by_level,
)
from infmon.model.compare.trial_stats import MIN_TRIALS, TrialStats, min_detectable_effect
from infmon.model.steps.result import StepResult

TRIALS_FILE = "trials.json"
TRIALS_SCHEMA = "infmon.trials/1"
UNTIL_CI_MAX_REPEAT = 10
"""``--until-ci`` without ``--repeat``: at most this many rounds."""


@dataclass(frozen=True, slots=True)
class TrialOptions:
    repeat: int = 1
    until_ci: float | None = None
    """Stop once every level's interval of each ``until_on`` figure is within this fraction of
    its mean."""
    until_on: tuple[str, ...] = (STOP_FIGURE,)
    """The figures ``until_ci`` waits on (``trials.json``'s names)."""
    retake: int = 0
    """Run a step the client self-check flagged again, this many times in the run at most."""

    @property
    def active(self) -> bool:
        return self.repeat > 1 or self.until_ci is not None


def add_trial_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("repeated trials")
    g.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="run the plan N times in rounds: mean, 95%% CI (t) and CV per level and figure",
    )
    g.add_argument(
        "--until-ci",
        metavar="PCT",
        help="stop repeating once every level's output tok/s 95%% CI is within ±PCT of its "
        f"mean (at least 3 rounds; at most --repeat, default {UNTIL_CI_MAX_REPEAT})",
    )
    g.add_argument(
        "--until-ci-on",
        metavar="FIGURE[,FIGURE…]",
        help="the figures --until-ci waits on, each at every level (default output_tok_s; "
        f"any of {', '.join(FIGURE_NAMES)}; goodput and attainment need --slo)",
    )
    g.add_argument(
        "--retake",
        type=int,
        metavar="N",
        help="run a step again when the client self-check flags it (the host starved the "
        "client: its timestamps were late), at most N times in the run; when a starvation took "
        "the load thread out of real time, the retake waits until it is back. Flagged steps "
        "stay in the report, marked, and out of the trials",
    )


def trials_from_args(args: argparse.Namespace) -> TrialOptions:
    repeat = getattr(args, "repeat", None)
    until_text = getattr(args, "until_ci", None)
    if repeat is not None and repeat < 1:
        raise CliError("--repeat: at least 1")
    until = None
    if until_text is not None:
        t = str(until_text).strip().rstrip("%")
        try:
            until = float(t) / 100
        except ValueError:
            raise CliError(f"--until-ci: a percentage, e.g. 3% (got {until_text!r})") from None
        if not 0 < until < 1:
            raise CliError("--until-ci: between 0 and 100%")
    retake = getattr(args, "retake", None)
    if retake is not None and retake < 0:
        raise CliError("--retake: 0 or more")
    return TrialOptions(
        repeat=repeat or (UNTIL_CI_MAX_REPEAT if until is not None else 1),
        until_ci=until,
        until_on=_until_on(
            getattr(args, "until_ci_on", None), until, bool(getattr(args, "slo", None))
        ),
        retake=retake or 0,
    )


def _until_on(text: str | None, until: float | None, slo: bool) -> tuple[str, ...]:
    """``--until-ci-on``'s figures (``--until-ci``'s own when not given)."""
    if text is None:
        return (STOP_FIGURE,)
    if until is None:
        raise CliError("--until-ci-on: the figures --until-ci waits on; give --until-ci PCT too")
    names = tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))
    if not names:
        raise CliError(f"--until-ci-on: one figure or more, of {', '.join(FIGURE_NAMES)}")
    for n in names:
        if n not in FIGURE_NAMES:
            raise CliError(f"--until-ci-on: {n!r} is none of {', '.join(FIGURE_NAMES)}")
        if n in SLO_FIGURES and not slo:
            raise CliError(f"--until-ci-on: {n} is measured under an SLO only; give --slo too")
    return names


def stop_rule(opts: TrialOptions) -> Callable[[list[StepResult]], bool] | None:
    target = opts.until_ci
    if target is None:
        return None

    def done(results: list[StepResult]) -> bool:
        levels = trials_by_level([(r.index, r.stats) for r in measured(results)])
        if all_tight(levels, target, opts.until_on):
            n = min(len(lv.steps) for lv in levels)
            say(
                f"trials: every level's {', '.join(opts.until_on)} within ±{target:.1%} after "
                f"{n} rounds"
            )
            return True
        return False

    return done


def loose_note(results: list[StepResult], opts: TrialOptions) -> str | None:
    """After the rounds, when ``--until-ci`` never got tight: which level's figure is still
    wider than asked, and how wide (None: every one is within, or no target)."""
    if opts.until_ci is None:
        return None
    levels = trials_by_level([(r.index, r.stats) for r in measured(results)])
    wide = loose(levels, opts.until_ci, opts.until_on)
    if not levels or not wide:
        return None
    rounds = max(len(lv.steps) for lv in levels)
    cells = ", ".join(f"{label} {name} {_width(s)}" for label, name, s in wide)
    return (
        f"trials: after {rounds} rounds (the most asked) not every level within "
        f"±{opts.until_ci:.1%}: {cells}; more --repeat rounds, or a quieter host, narrow them"
    )


def measured(results: list[StepResult]) -> list[StepResult]:
    """The steps whose timestamps measured the server: those the client self-check did not flag
    (a starved client's steps hold its own waits)."""
    return [r for r in results if not r.stats.client_late]


def _width(s: TrialStats) -> str:
    if s.n >= MIN_TRIALS and math.isfinite(s.half_width):
        return f"±{s.half_width:.1%}"
    return f"{s.n} trials ({MIN_TRIALS} needed)"


def _cell(lv: LevelTrials, name: str) -> str:
    s = lv.get(name)
    if s.n == 0 or math.isnan(s.mean):
        return "—"
    if s.n < 2:
        return f"{s.mean:,.1f}"
    return f"{s.mean:,.1f} ({s.ci_low:,.1f}–{s.ci_high:,.1f}) cv {s.cv:.1%}"


SHOWN = (STOP_FIGURE, "ttft_p90_ms", "tpot_p90_ms")
"""The figures the trials table always prints; ``--until-ci-on``'s others get a line each."""
LABELS = {
    "output_tok_s": "out tok/s",
    "request_req_s": "req/s",
    "goodput_req_s": "goodput req/s",
    "slo_attainment": "SLO attainment",
}


def _label(name: str) -> str:
    """``ttft_p50_ms`` → ``TTFT p50 ms``."""
    if name in LABELS:
        return LABELS[name]
    head, *rest = name.split("_")
    return " ".join([head.upper(), *rest])


def print_trials(levels: list[LevelTrials], also: Sequence[str] = ()) -> None:
    say("trials: mean (95% CI, t) and CV per level")
    for lv in levels:
        tok = lv.get(STOP_FIGURE)
        mde = min_detectable_effect(tok.cv, tok.n)
        say(
            f"  {lv.label:>8} n={len(lv.steps)}  "
            + "  ·  ".join(f"{_label(name)} {_cell(lv, name)}" for name in SHOWN)
        )
        for name in (n for n in also if n not in SHOWN):
            say(f"           {_label(name)} {_cell(lv, name)}")
        if not math.isnan(mde):
            say(f"           a change of tok/s smaller than ±{mde:.1%} needs more trials to see")


def write_trials(
    results: list[StepResult],
    session_dir: Path,
    extra: Mapping[int, Mapping[str, float]],
    also: Sequence[str] = (),
) -> list[dict[str, object]]:
    """``trials.json`` in the session, and the trials table printed (``also``: figures shown
    besides the table's own, those ``--until-ci-on`` waited on)."""
    kept = measured(results)
    levels = trials_by_level([(r.index, r.stats) for r in kept], extra)
    left_out = [r for r in results if r.stats.client_late]
    print_trials(levels, also)
    if left_out:
        say(
            f"trials leave out step {', '.join(str(r.index) for r in left_out)}: the client "
            "self-check flagged it (its timestamps were late; --retake N runs such a step again)"
        )
    doc = [lv.to_dict() for lv in levels]
    path = session_dir / TRIALS_FILE
    body: dict[str, object] = {"schema": TRIALS_SCHEMA, "levels": doc}
    if left_out:
        body["left_out"] = [
            {"step": r.index, "why": "client self-check: the client's timestamps were late"}
            for r in left_out
        ]
    try:
        write_text_atomic(path, json.dumps(body, indent=2, allow_nan=False) + "\n")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}") from None
    return doc
