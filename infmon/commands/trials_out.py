"""``--repeat N`` and ``--until-ci PCT`` (bench; method passes them on): the options, the stop
rule after each round, and the trials table and ``trials.json`` at the end."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.journal.safefile import write_text_atomic
from infmon.model.compare.trial_figures import STOP_FIGURE, LevelTrials, all_tight, trials_by_level
from infmon.model.compare.trial_stats import min_detectable_effect
from infmon.model.steps.ledger import StepResult

TRIALS_FILE = "trials.json"
TRIALS_SCHEMA = "infmon.trials/1"
UNTIL_CI_MAX_REPEAT = 10
"""``--until-ci`` without ``--repeat``: at most this many rounds."""


@dataclass(frozen=True, slots=True)
class TrialOptions:
    repeat: int = 1
    until_ci: float | None = None
    """Stop once every level's output tok/s interval is within this fraction of its mean."""
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
        repeat or (UNTIL_CI_MAX_REPEAT if until is not None else 1), until, retake or 0
    )


def stop_rule(opts: TrialOptions) -> Callable[[list[StepResult]], bool] | None:
    target = opts.until_ci
    if target is None:
        return None

    def done(results: list[StepResult]) -> bool:
        levels = trials_by_level([(r.index, r.stats) for r in measured(results)])
        if all_tight(levels, target):
            n = min(len(lv.steps) for lv in levels)
            say(f"trials: every level's {STOP_FIGURE} within ±{target:.1%} after {n} rounds")
            return True
        return False

    return done


def measured(results: list[StepResult]) -> list[StepResult]:
    """The steps whose timestamps measured the server: those the client self-check did not flag
    (a starved client's steps hold its own waits)."""
    return [r for r in results if not r.stats.client_late]


def _cell(lv: LevelTrials, name: str) -> str:
    s = lv.get(name)
    if s.n == 0 or math.isnan(s.mean):
        return "—"
    if s.n < 2:
        return f"{s.mean:,.1f}"
    return f"{s.mean:,.1f} ({s.ci_low:,.1f}–{s.ci_high:,.1f}) cv {s.cv:.1%}"


def print_trials(levels: list[LevelTrials]) -> None:
    say("trials: mean (95% CI, t) and CV per level")
    for lv in levels:
        tok = lv.get(STOP_FIGURE)
        mde = min_detectable_effect(tok.cv, tok.n)
        say(
            f"  {lv.label:>8} n={len(lv.steps)}  out tok/s {_cell(lv, STOP_FIGURE)}"
            f"  ·  TTFT p90 ms {_cell(lv, 'ttft_p90_ms')}  ·  TPOT p90 ms {_cell(lv, 'tpot_p90_ms')}"
        )
        if not math.isnan(mde):
            say(f"           a change of tok/s smaller than ±{mde:.1%} needs more trials to see")


def write_trials(
    results: list[StepResult], session_dir: Path, extra: Mapping[int, Mapping[str, float]]
) -> list[dict[str, object]]:
    kept = measured(results)
    levels = trials_by_level([(r.index, r.stats) for r in kept], extra)
    left_out = [r for r in results if r.stats.client_late]
    print_trials(levels)
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
