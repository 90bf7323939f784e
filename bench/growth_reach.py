"""Could anything forecast c = 8 and 16 from c = 1, 2, 4 on this host? The sweeps' own answer.

Issue 30's must-show 1 fits ``infmon sim --fit`` at c = 1, 2, 4 of the real vLLM here and asks
its forecast at c = 8 and 16 to land within ±15% of the mean of their rounds: mean TPOT, TTFT
p50 and output tok/s. This script asks the sweeps themselves how far that is reachable, with no
model of the server at all. It reads sweeps of c = 1, 2, 4, 8, 16 of one server (session
directories, the ``.journal.sqlite.xz`` fixtures of ``tests/fixtures/sessions``, or the table
``--save-table`` writes) and prints:

- each sweep's growth from c=4 to c=16 and from c=1 to c=4 per figure (the level means over its
  rounds), their spread over the sweeps, and Pearson's r between the two: a shape that held
  from sweep to sweep would show a narrow c=4 → 16 growth, and a forecast reading it from c = 1,
  2, 4 needs r > 0;
- **the other sweeps' curve**: for each sweep, the mean curve of every *other* sweep (geometric,
  per figure and level), scaled to this sweep's own c = 1, 2, 4 (one factor per figure, the mean
  log ratio over the three levels). It knows this server's typical shape from all the other
  sweeps and this sweep's pace from its fitted levels, with no model in between: how often it
  holds all six figures within ``--tolerance`` is what the host leaves for any forecast from
  c = 1, 2, 4.

    python bench/growth_reach.py                                   # bench/data: 12 real sweeps
    python bench/growth_reach.py SESSION_DIR ... [--save-table T.csv]
    python bench/growth_reach.py steady-vllm wandering-vllm ...      # fixtures by name

A steps table (``--save-table``) keeps what this reads of each step: the sweep, the step, its
concurrency and the three figures; ``bench/data/real-vllm-sweeps.csv`` holds the twelve sweeps of
5-6 Dec cited in the README ("Fitted to your own server"), its source note beside it.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TABLE = ROOT / "bench" / "data" / "real-vllm-sweeps.csv"
FITTED = (1, 2, 4)
HELD = (8, 16)
FIGURES = ("TPOT", "TTFT p50", "tok/s")
COLUMNS = ("sweep", "step", "concurrency", "tpot_ms", "ttft_p50_ms", "output_tok_s")


@dataclass(frozen=True, slots=True)
class Row:
    """One measured step of a sweep: its three figures (ms, ms, tokens/s)."""

    sweep: str
    step: int
    concurrency: int
    figures: tuple[float, float, float]


def rows_of_session(source: str, tmp: Path) -> list[Row]:
    """A session directory's (or a fixture's) steps, as ``sim --fit`` reads them: the steps the
    client self-check flagged are left out."""
    from bench.shape_transfer import session_dir
    from infmon.commands.simfit_read import read_session

    obs, _ = read_session(session_dir(source, tmp), "auto", [])
    return [
        Row(source, o.step, o.concurrency, (o.tpot_s * 1e3, o.ttft_p50_s * 1e3, o.output_tok_s))
        for o in obs
    ]


def read_table(path: Path) -> list[Row]:
    with path.open(newline="") as f:
        return [
            Row(
                r["sweep"],
                int(r["step"]),
                int(r["concurrency"]),
                (float(r["tpot_ms"]), float(r["ttft_p50_ms"]), float(r["output_tok_s"])),
            )
            for r in csv.DictReader(f)
        ]


def write_table(path: Path, rows: Sequence[Row]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([r.sweep, r.step, r.concurrency, *(f"{x:.4f}" for x in r.figures)])


def level_means(rows: Sequence[Row]) -> dict[str, np.ndarray]:
    """Per sweep, the log of each level's mean figure (levels of ``FITTED + HELD``, by figure);
    a sweep missing a level is left out."""
    by: dict[str, dict[int, list[tuple[float, float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in rows:
        by[r.sweep][r.concurrency].append(r.figures)
    out = {}
    for sweep, levels in by.items():
        if all(c in levels for c in FITTED + HELD):
            means = [np.mean(np.array(levels[c]), axis=0) for c in FITTED + HELD]
            out[sweep] = np.log(np.array(means))
    return out


def others_curve(curves: dict[str, np.ndarray], sweep: str) -> np.ndarray:
    """Forecast ÷ measured at the held-out levels (rows c = 8, 16; columns the figures): the
    other sweeps' mean log curve, shifted by this sweep's mean log offset at c = 1, 2, 4."""
    others = np.array([v for k, v in curves.items() if k != sweep])
    mine = curves[sweep]
    mean = others.mean(axis=0)
    n = len(FITTED)
    shift = (mine[:n] - mean[:n]).mean(axis=0)
    ratio: np.ndarray = np.exp(mean[n:] + shift - mine[n:])
    return ratio


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sweeps", nargs="*", help="session dirs or fixture names (default: --table)")
    p.add_argument("--table", type=Path, help=f"a steps table (default {TABLE.relative_to(ROOT)})")
    p.add_argument("--save-table", type=Path, help="write the steps read to this CSV")
    p.add_argument("--tolerance", type=float, default=0.15)
    args = p.parse_args(argv)

    if args.sweeps:
        with tempfile.TemporaryDirectory() as tmp:
            rows = [r for s in args.sweeps for r in rows_of_session(s, Path(tmp))]
    else:
        rows = read_table(args.table or TABLE)
    if args.save_table:
        write_table(args.save_table, rows)
    curves = level_means(rows)
    if len(curves) < 3:
        print(f"{len(curves)} sweeps of c = 1, 2, 4, 8, 16: at least 3 are needed")
        return 2

    n = len(FITTED)
    late = np.array([v[n + 1] - v[n - 1] for v in curves.values()])  # log c=16 / c=4
    early = np.array([v[n - 1] - v[0] for v in curves.values()])  # log c=4 / c=1
    print(f"{len(curves)} sweeps; growth (÷) per figure, over the sweeps:")
    for i, name in enumerate(FIGURES):
        g16, g4 = np.exp(late[:, i]), np.exp(early[:, i])
        spread = early[:, i].std() > 1e-12 and late[:, i].std() > 1e-12
        r = f"{np.corrcoef(early[:, i], late[:, i])[0, 1]:+.2f}" if spread else "- (no spread)"
        print(
            f"  {name:8}  c=4 → 16: {g16.min():.2f}-{g16.max():.2f} (mean {g16.mean():.2f}, "
            f"SD {g16.std(ddof=1) / g16.mean():.0%})   c=1 → 4: {g4.min():.2f}-{g4.max():.2f}"
            f"   r between the two: {r}"
        )
    head = "  ".join(f"c={c} {f}" for c in HELD for f in FIGURES)
    print(f"the other sweeps' curve, scaled to each sweep's c = 1, 2, 4 ({head}):")
    passed = 0
    within = np.zeros((len(HELD), len(FIGURES)), dtype=int)
    for sweep in curves:
        ratio = others_curve(curves, sweep)
        inside = np.abs(ratio - 1) <= args.tolerance
        within += inside
        passed += bool(inside.all())
        cells = "  ".join(f"{x:.2f}" for x in ratio.ravel())
        worst = float(np.abs(ratio - 1).max())
        print(f"  {sweep}: {cells}  worst {worst:.0%}{'  all six' if inside.all() else ''}")
    per = ", ".join(
        f"c={c} {f} {within[j, i]}" for j, c in enumerate(HELD) for i, f in enumerate(FIGURES)
    )
    print(f"within ±{args.tolerance:.0%}, per figure (of {len(curves)}): {per}")
    print(f"all six within ±{args.tolerance:.0%}: {passed} of {len(curves)} sweeps")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
