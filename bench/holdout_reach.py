"""How often can a held-out check pass on this host? The check's own reach, from a session of many
rounds.

Issue 30's must-show 1 fits ``infmon sim --fit`` at c = 1, 2, 4 and asks the forecast at c = 8 and
16 to land within ±15% of a bench run there (the mean of 3 interleaved rounds, in the real-server
test). When rounds of one level wander, that check can fail a forecast that is right. This script
reads one bench session of ``R`` rounds (``bench --repeat R``, R ≥ 4) and, over subsets of ``k``
of those rounds (``--rounds``, default 3: the test's), counts how often the check passes:

- **the oracle**: the mean of the rounds *not* in the subset, as the forecast of the subset's
  mean at each held-out level. It knows the level as well as the other rounds do, with no model
  in between: its pass rate is the most any forecast could expect from this host's rounds.
- **the fit** (``--fits N``, default 10): ``sim --fit`` on the subset's own rounds of the other
  levels, its forecast at the held-out levels: the test as written, replayed on recorded rounds.

Per figure (TPOT, TTFT p50, output tok/s) and level it prints the share of subsets where the
forecast was within ``--tolerance`` of the subset's mean, and the share where every figure of
every held-out level was (what the test asks). Nothing is run against a server: it reads a
session already recorded.

    python bench/holdout_reach.py SESSION_DIR                       # c = 8, 16 held out, k = 3
    python bench/holdout_reach.py SESSION_DIR --holdout 8,16 --rounds 3 --fits 20
    python bench/holdout_reach.py SESSION_DIR --shape-from WIDE.toml   # a wider sweep's shape

README ("Fitted to your own server") cites its figures for the real vLLM of this host.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infmon.sim.observation import Observation  # noqa: E402
from infmon.sim.rounds import FIGURES, figure_value, forecast_figures, round_index  # noqa: E402

Forecast = Callable[[frozenset[int], list[Observation], int], dict[str, float]]
"""(the subset's rounds, its observations, a held-out level) → figure → forecast value."""


@dataclass(frozen=True, slots=True)
class Reach:
    """One way of forecasting, over subsets: per (level, figure) how many subsets passed."""

    name: str
    subsets: int
    passed: dict[tuple[int, str], int]
    all_passed: int


def subset(
    obs: Sequence[Observation], index: Sequence[int], rounds: frozenset[int]
) -> list[Observation]:
    """The observations of ``rounds`` (``index``: each one's round, ``round_index``)."""
    return [o for o, r in zip(obs, index, strict=True) if r in rounds]


def judge(
    obs: Sequence[Observation],
    subsets: Sequence[frozenset[int]],
    held: Sequence[int],
    forecast: Forecast,
    tolerance: float,
    name: str,
) -> Reach:
    passed: dict[tuple[int, str], int] = {(c, f): 0 for c in held for f, *_ in FIGURES}
    every = 0
    index = round_index(obs)
    for rounds in subsets:
        mine = subset(obs, index, rounds)
        ok = True
        for c in held:
            level = [o for o in mine if o.concurrency == c]
            guess = forecast(rounds, mine, c) if level else {}
            for f, *_ in FIGURES:
                good = (
                    bool(level)
                    and abs(guess[f] / statistics.fmean(figure_value(o, f) for o in level) - 1)
                    <= tolerance
                )
                passed[(c, f)] += good
                ok = ok and good
        every += ok
    return Reach(name, len(subsets), passed, every)


def oracle(obs: Sequence[Observation]) -> Forecast:
    """Each held-out level's mean over the rounds outside the subset."""
    index = round_index(obs)

    def guess(rounds: frozenset[int], _: list[Observation], c: int) -> dict[str, float]:
        others = [o for o, r in zip(obs, index, strict=True)
                  if o.concurrency == c and r not in rounds]  # fmt: skip
        return {f: statistics.fmean(figure_value(o, f) for o in others) for f, *_ in FIGURES}

    return guess


def fitted(base: object, held: Sequence[int], carried: object = None) -> Forecast:
    """``sim --fit`` on the subset's other levels (with ``carried``: the growth's shape of a
    wider sweep, as ``--shape-from`` gives it); its forecast at ``c``."""
    from infmon.sim.forecast import holdout

    last: dict[frozenset[int], dict[int, dict[str, float]]] = {}  # one fit per subset

    def guess(rounds: frozenset[int], mine: list[Observation], c: int) -> dict[str, float]:
        if rounds not in last:
            _, left = holdout(base, mine, set(held), carried)  # type: ignore[arg-type]
            last.clear()
            last[rounds] = {h.observation.concurrency: forecast_figures(h.forecast) for h in left}
        return last[rounds][c]

    return guess


def render(reach: Reach, held: Sequence[int], tolerance: float) -> list[str]:
    label = {f: name for f, name, *_ in FIGURES}
    lines = [f"{reach.name}: {reach.subsets} subsets"]
    for c in held:
        cells = "  ".join(
            f"{label[f]} {reach.passed[(c, f)] / reach.subsets:.0%}" for f, *_ in FIGURES
        )
        lines.append(f"  c={c}: within ±{tolerance:.0%} in  {cells}")
    lines.append(
        f"  every figure of every held-out level: {reach.all_passed} of {reach.subsets} "
        f"({reach.all_passed / reach.subsets:.0%})"
    )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("session", type=Path)
    p.add_argument("--holdout", default="8,16", help="held-out concurrencies (default 8,16)")
    p.add_argument("--rounds", type=int, default=3, help="rounds in one check (default 3)")
    p.add_argument("--fits", type=int, default=10, help="subsets fitted (default 10; 0: none)")
    p.add_argument("--tolerance", type=float, default=0.15)
    p.add_argument("--seed", type=int, default=30)
    p.add_argument(
        "--shape-from",
        type=Path,
        metavar="FILE",
        help="fit with the growth's shape of this profile (sim --fit --shape-from)",
    )
    args = p.parse_args(argv)

    from infmon.commands.simfit import carried_growth
    from infmon.commands.simfit_read import base_config, read_session

    obs, server = read_session(args.session)
    held = sorted(int(x) for x in args.holdout.split(","))
    total = max(round_index(obs), default=-1) + 1
    if total < args.rounds + 1:
        print(
            f"{args.session}: {total} rounds; the oracle needs more than --rounds ({args.rounds})"
        )
        return 2
    everything = [frozenset(s) for s in itertools.combinations(range(total), args.rounds)]
    print(f"{args.session}: {total} rounds, {len(obs)} steps; checks of {args.rounds} rounds")
    reach = judge(obs, everything, held, oracle(obs), args.tolerance,
                  f"oracle (the other {total - args.rounds} rounds' mean)")  # fmt: skip
    for line in render(reach, held, args.tolerance):
        print(line)
    if args.fits > 0:
        picked = random.Random(args.seed).sample(everything, min(args.fits, len(everything)))
        base = base_config([server])  # the recorded server's own
        carried = carried_growth(args.shape_from)
        how = f", the growth's shape {carried.source}" if carried else ""
        reach = judge(obs, picked, held, fitted(base, held, carried), args.tolerance,
                      f"the fit (sim --fit on the subset's other levels{how})")  # fmt: skip
        for line in render(reach, held, args.tolerance):
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
