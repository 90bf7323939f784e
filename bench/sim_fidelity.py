"""The simulator against published GPU measurements: each point, the sim's prediction, the ratio.

Every prediction is ``infmon sim --predict`` (the engine in virtual time) for the setup the source
describes; a ratio outside 0.75-1.33 (or a shape check on the wrong side) fails the run. The
second table is the n-gram drafter on text: the acceptance it reaches on paragraphs of Python's
own documentation (``pydoc_data.topics``) and on random common words, through the HTTP server.

    python bench/sim_fidelity.py            # prints both tables (Markdown), exit 1 on a miss
    python bench/sim_fidelity.py --leave-one-out   # beside each ratio: refitted from priors on
                                            # every point, and on every point but that one
"""

from __future__ import annotations

import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infmon.load.workload.words import random_words
from infmon.sim.analysis import ngram_acceptance
from infmon.sim.fidelity import BAND, evaluate
from infmon.sim.scenarios import SCENARIOS, build_config


def corpus_prompts(n: int = 40, min_chars: int = 600) -> list[str]:
    """Paragraph runs of Python's own documentation, as a summarise-this request carries them."""
    from pydoc_data.topics import topics

    texts = [t for _, t in sorted(topics.items()) if len(t) >= min_chars]
    return ["Summarise this passage:\n\n" + t[:2400] for t in texts[:n]]


def random_prompts(n: int = 40, tokens: int = 500) -> list[str]:
    rng = random.Random(0)
    return [random_words(rng, tokens).lstrip() for _ in range(n)]


def ngram_figures() -> tuple[tuple[float, float], tuple[float, float]]:
    cfg = build_config(SCENARIOS["baseline"], speculative_k=4, spec_method="ngram")
    return ngram_acceptance(cfg, corpus_prompts()), ngram_acceptance(cfg, random_prompts())


def leave_one_out_table() -> None:
    """In-sample (shipped profiles), refitted from neutral priors on every point, and out of
    sample (refitted without the point): ``infmon.sim.fidelity_loo``."""
    from infmon.sim.fidelity_loo import leave_one_out

    t0 = time.process_time()
    rows = leave_one_out()
    print("| published point | published | in-sample | refit, all points | leave-one-out |")
    print("|---|---|---|---|---|")
    for r in rows:
        p = r.point
        pub = f"{'< ' if p.bound else ''}{p.published:g} {p.unit}"
        print(
            f"| {p.name} | {pub} | {r.in_sample:.2f} | {r.refit_all:.2f} | {r.out_of_sample:.2f} |"
        )
    fit = [r for r in rows if not r.point.bound]
    worst = max(fit, key=lambda r: abs(math.log(r.out_of_sample)))
    inside = sum(BAND[0] <= r.out_of_sample <= BAND[1] for r in fit)
    print(
        f"\nout of sample: {inside}/{len(fit)} inside {BAND[0]}-{BAND[1]}; worst "
        f"{worst.out_of_sample:.2f} ({worst.point.name}) ({time.process_time() - t0:.0f} s CPU)"
    )


def main() -> int:
    if "--leave-one-out" in sys.argv[1:]:
        leave_one_out_table()
        return 0
    t0 = time.process_time()
    results = evaluate()
    print("| published point | published | sim | ratio | source |")
    print("|---|---|---|---|---|")
    for r in results:
        p = r.point
        pub = f"{'< ' if p.bound else ''}{p.published:g} {p.unit}"
        flag = "" if r.ok else " **miss**"
        print(f"| {p.name} | {pub} | {r.predicted:.2f} | {r.ratio:.2f}{flag} | {p.source} |")
    ok = all(r.ok for r in results)
    print(
        f"\n{len(results)} points, band {BAND[0]}-{BAND[1]}: {'all inside' if ok else 'MISSES'}"
        f" ({time.process_time() - t0:.1f} s CPU)"
    )
    natural, random_words = ngram_figures()
    print("\n| n-gram drafter (k=4, lookup 2-5) on | acceptance rate | mean acceptance length |")
    print("|---|---|---|")
    for label, (rate, length) in (
        ("pydoc_data.topics paragraphs", natural),
        ("random common words", random_words),
    ):
        print(f"| {label} | {rate:.3f} | {length:.2f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
