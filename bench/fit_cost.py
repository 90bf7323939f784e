"""What ``infmon sim --fit`` costs: seconds of CPU, replays, engine steps, and each replayed
step against a plain simulated engine step in the same run.

A fit replays every fitted level at each trial of its parameters (``infmon.sim.levels``): the
engine's scheduler steps in virtual time, and each step's cost is also kept as a vector over the
fitted costs, so one replay gives a level's figures and their derivatives. This script fits the
c = 1, 2, 4 of a recorded sweep (``--holdout 8,16``'s fit, as the real-server check runs it),
timed, then counts what it did in a second pass; the reference is the same levels run by the
simulator's own engine (``infmon.sim.levels.measure`` with the roofline cost), timed per step.

    python bench/fit_cost.py                  # the jittered real-vLLM sweep in the fixtures
    python bench/fit_cost.py SESSION_DIR ...  # sweeps of your own server

README ("Measured") cites its figures.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.shape_transfer import session_dir  # noqa: E402
from infmon.sim import engine, fit, levels  # noqa: E402

FITTED = (1, 2, 4)


@contextmanager
def counting(owner: object, name: str, counter: list[int]) -> Iterator[None]:
    """Count the calls of ``owner.name`` while inside (the counting pass only: never timed)."""
    original: Callable[..., object] = getattr(owner, name)

    def counted(*args: object, **kwargs: object) -> object:
        counter[0] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)
    try:
        yield
    finally:
        setattr(owner, name, original)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sweeps", nargs="*", default=["jittered-vllm"], help="session dirs or fixtures")
    args = p.parse_args(argv)

    from infmon.commands.simfit_read import base_config, read_session

    for src in args.sweeps:
        with tempfile.TemporaryDirectory() as tmp:
            obs, server = read_session(session_dir(src, Path(tmp)), "auto", [])
        base = base_config([server])
        obs = [o for o in obs if o.concurrency in FITTED]
        t0 = time.process_time()
        result = fit.fit(base, obs)
        fit_s = time.process_time() - t0
        replays, steps = [0], [0]
        with counting(fit, "replay", replays), counting(engine.Engine, "step", steps):
            fit.fit(base, obs)
        ref_steps = [0]
        t0 = time.process_time()
        with counting(engine.Engine, "step", ref_steps):
            for o in obs:
                levels.measure(base, o.shape)
        ref_s = time.process_time() - t0
        per_step, ref_per_step = fit_s / steps[0], ref_s / ref_steps[0]
        print(
            f"{Path(src).name.split('.')[0]}: {len(obs)} steps at c = 1, 2, 4; fit "
            f"{fit_s:.1f} s of CPU, {result.iterations} iterations, {replays[0]} replays, "
            f"{steps[0]:,} engine steps: {per_step * 1e6:.1f} µs a step; the simulator's own "
            f"engine on the same levels {ref_per_step * 1e6:.1f} µs a step "
            f"(replayed ÷ plain: {per_step / ref_per_step:.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
