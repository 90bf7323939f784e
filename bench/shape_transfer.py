"""How should a fit of c = 1, 2, 4 grow past them: the line, the rate form, a wider sweep's shape?

Issue 30's must-show 1 fits ``infmon sim --fit`` at c = 1, 2, 4 and forecasts c = 8 and 16.
Levels up to 4 cannot show whether TPOT and the API server's wait grow slower past them (on the
real vLLM here both do). A fit of them takes the rate form (``infmon.sim.costmodel``: both grow
with the tokens streamed per second) unless ``--shape-from`` carries the shape of a wider sweep.
This script takes sweeps of c = 1-16 (session directories, or the ``.journal.sqlite.xz``
fixtures of ``tests/fixtures/sessions``) and fits each one's c = 1, 2, 4 three ways: the line,
the rate form (the check as written), and with every other sweep's shape, read from its own
levels (``infmon.sim.growth.growth_shape``). It compares each forecast at c = 8 and 16 with the
mean of the sweep's rounds there: mean TPOT, TTFT p50 and output tok/s, within
``--tolerance`` (15%) as the test asks. ``--no-carry`` skips the carried shapes (one fit per
sweep and form: fast).

    python bench/shape_transfer.py                      # the real-vLLM sweeps in the fixtures
    python bench/shape_transfer.py SESSION_DIR ...      # sweeps of your own server

README ("Fitted to your own server") cites its figures for the real vLLM of this host.
"""

from __future__ import annotations

import argparse
import lzma
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infmon.sim.growth import Growth  # noqa: E402
from infmon.sim.observation import Observation  # noqa: E402
from infmon.sim.rounds import FIGURES  # noqa: E402

FIXTURES = ("wandering-vllm", "steady-vllm", "jittered-vllm")
HELD = (8, 16)


def session_dir(source: str, tmp: Path) -> Path:
    """A session directory, or a fixture's journal unpacked into one."""
    path = Path(source)
    if path.is_dir():
        return path
    if not path.exists():
        path = ROOT / "tests" / "fixtures" / "sessions" / f"{source}.journal.sqlite.xz"
    out = tmp / path.name.split(".")[0]
    out.mkdir()
    (out / "journal.sqlite").write_bytes(lzma.decompress(path.read_bytes()))
    return out


def ratios(
    base: object, obs: list[Observation], carried: Growth | None, rate: bool | None
) -> list[tuple[float, float, bool]]:
    """Forecast ÷ the rounds' mean of each figure at each held-out level (c=8 first), the
    forecast's 95% band as a fraction of it, and whether the mean lies in that band."""
    from infmon.sim.forecast import holdout
    from infmon.sim.rounds import held_levels

    _, left = holdout(base, obs, set(HELD), carried, rate)  # type: ignore[arg-type]
    levels = sorted(held_levels(left), key=lambda h: h.concurrency)
    return [
        (1.0 + err, dict(h.bands)[f], h.inside_band()[f]) for h in levels for f, err in h.errors
    ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("sweeps", nargs="*", default=list(FIXTURES), help="session dirs or fixtures")
    p.add_argument("--tolerance", type=float, default=0.15)
    p.add_argument("--no-carry", action="store_true", help="the line and the rate form only")
    args = p.parse_args(argv)

    from infmon.commands.simfit_read import base_config, read_session
    from infmon.sim.growth import growth_shape

    with tempfile.TemporaryDirectory() as tmp:
        data = {}
        for src in args.sweeps:
            obs, server = read_session(session_dir(src, Path(tmp)), "auto", [])
            name = Path(src).name.split(".")[0]
            if name in data:  # two session dirs of one name: told apart by their paths
                name = src
            data[name] = (obs, base_config([server]))
    shapes = {name: growth_shape(obs) for name, (obs, _) in data.items()}
    head = "  ".join(f"c={c} {label}" for c in HELD for _, label, *_ in FIGURES)
    print(f"forecast ÷ the rounds' mean, fitted at c = 1, 2, 4 ({head}); ±{args.tolerance:.0%}")
    for name, g in shapes.items():
        print(f"  {name}: its own shape: TPOT running ** {g.seq:.2f}, API wait {g.stream:.2f}")
    passed = {"line": [0, 0], "rate": [0, 0], "carried": [0, 0]}
    covered = {kind: [0, 0] for kind in passed}
    for name, (obs, base) in data.items():
        rows: list[tuple[str, str, Growth | None, bool | None]] = [
            ("the line", "line", None, False),
            ("the rate form", "rate", None, True),
        ]
        if not args.no_carry:
            rows += [
                (f"shape of {other}", "carried", g, None)
                for other, g in shapes.items()
                if other != name
            ]
        for label, kind, carried, rate in rows:
            r = ratios(base, obs, carried, rate)
            worst = max(abs(x - 1) for x, _, _ in r)
            ok = worst <= args.tolerance
            passed[kind][0] += ok
            passed[kind][1] += 1
            covered[kind][0] += sum(inside for *_, inside in r)
            covered[kind][1] += len(r)
            cells = " ".join(f"{x:.2f}" for x, _, _ in r)
            bands = " ".join(f"{w:.0%}{'' if inside else '!'}" for _, w, inside in r)
            print(
                f"  {name} with {label}: {cells}  worst {worst:.0%}{'  all inside' if ok else ''}"
                f"  (bands ±{bands}; !: the mean outside)"
            )
    for kind, (ok, n) in passed.items():
        if n:
            inside, figures = covered[kind]
            print(
                f"{kind}: all six figures inside in {ok} of {n} fits; the rounds' mean inside "
                f"the forecast's 95% band in {inside} of {figures} figures"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
