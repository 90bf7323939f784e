"""The simulator fitted to a real vLLM (issue 30, must-show 1): bench at c=1,2,4, `infmon sim
--fit`, then the fitted server's forecast at c=8 and c=16 against a bench run at those levels:
mean TPOT, TTFT p50 and output tokens/s each within 15%. Prompts of 32 tokens, outputs of 29-35
(``LOAD``: ``infmon bench``'s default spread of a 32-token output).

One bench session runs c = 1, 2, 4, 8, 16 in three rounds (``--repeat 3``), and the fit leaves
c = 8 and 16 out (``--holdout 8,16``, the issue's own held-out check): the fit sees only c = 1,
2, 4, the check is the mean of the three rounds at c = 8 and 16 it never saw. On this 2-core
host a level's tokens/s drifts by ±15% over an hour (vLLM's CPU processes spin on both cores;
a fresh server sped up 2.22 → 1.63 ms TPOT at c=1 over three rounds), so a fit session and a
check session run one after the other differ by the hour, not by the model: interleaved rounds
put the same drift on both sides. Each round's figures are printed.

The vLLM runs with ``--enable-per-request-metrics``, so ``--fit``'s default targets are both the
client's streams and the server's own timings: the engine's steps are pinned by the server's
figures, and the client's TTFT adds the API server's time (``request_s``, and its event loop's
wait for every other stream open, ``frontend_stream_s``).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from infmon.commands.simfit_read import base_config, read_session
from infmon.sim import fitio
from infmon.sim.forecast import forecast
from tests.real.harness import explain, infmon, rs
from tests.recorded import unpack_journal

# unmet: live since the replay's queued stamp and half-step wait (3 Dec, on the rounds the client
# self-check did not flag), one pass in two: c=8 / 16 TPOT 1.05 / 1.07, TTFT p50 1.00 / 0.95,
# tok/s 0.91 / 0.92 (7 of 15 steps flagged); then c=16 TTFT p50 0.73 (6 flagged). Three kept
# sessions refitted offline hold 18 of 18 (0.86-1.05). c=16's TTFT grows faster than the fit's
# one cost per open stream from c=1, 2, 4 predicts when the host starves; in an hour when it
# starves throughout, the retakes wait out real time's back-off (up to 600 s) and the run outlasts
# its timeout. 4 Dec, with the high fair share: benched clean (0 of 15 flagged) in 5 minutes, and
# the fit missed on its own (c=16 TPOT 1.30, TTFT p50 1.48, tok/s 0.71: a linear per-sequence
# cost fitted at c = 1, 2, 4 where this CPU build's TPOT grows slower from c=4). 4 Dec afternoon:
# the rounds wandered (c=2 TPOT 2.40, 3.29, 4.44 ms in one run; vLLM's own bench client at c=8
# read 781-2,001 tok/s in six runs of one server), the fit missed (c=16 TPOT 1.30, TTFT p50
# 1.38, tok/s 0.70), and `sim --fit` now warns of the wander. 4 Dec evening: c=8 inside (0.98,
# 1.12, 0.94), c=16 out (TPOT 1.10, TTFT p50 1.25, tok/s 0.83; rounds 1,955-2,867 tok/s, "the
# server's own per-request TPOT moved with the client's in every round"); an idle core of this
# VM ran a fixed unit of work in 8 or 15 ms of CPU time by turns; c=16's TTFT p50 came out
# 1.25-1.48 in all five sessions of 4 Dec (the API server's wait per open stream bends past c=4).
# 4 Dec night, ten rounds of this load by hand: the rounds know each held-out mean to ±14-22%
# (95%); TPOT and tok/s inside that, TTFT p50 +28% / +64% beyond it (the model's); c=16's TTFT
# p50 moved with the closed loop's waves (r = 0.74); a forecast equal to the other seven rounds'
# mean passed this check in 17% of three-round subsets (bench/holdout_reach.py). Then with the
# fitted waves, in a steady half hour (c=8/16 TPOT and tok/s rounds within CV 5-8%): c=8 1.10,
# 1.30, 0.85; c=16 1.32, 1.45, 0.72, beyond the rounds' own noise: TPOT's cost per sequence
# halves past c=4 here (0.3 -> 0.15 ms), which one cost per sequence cannot follow: README.
# 5 Dec (0 of 15 flagged, 11 of 15 figures wandered): as written c=8 0.89, 1.02, 1.08; c=16
# 1.04, 1.35, 0.89 (c=16 TTFT p50 rounds 8.4, 26.8, 18.6 ms); the second test, the growth's
# shape carried from the 4 Dec sweep: c=8 0.87, 0.87, 1.12; c=16 0.98, 0.93, 1.00, passed.
# Levels up to c=4 cannot show the bend. 5 Dec 05:29, the fit of c = 1, 2, 4 in the rate form
# (the growth with the tokens streamed per second, its default now): c=8 1.03, 1.06, 0.93; c=16
# 1.02, 1.14, 0.90, passed (the line on those rounds: c=16 1.28, 1.70, 0.69); 05:39, 14 of 15
# figures wandered and that sweep's TPOT grew as a line: c=8 0.83, 0.91, 1.15; c=16 0.73, 0.72,
# 1.29 (the carried shape failed too); 06:06, c=2's rounds 1.71-3.56 ms TPOT: c=8 0.73, 0.88,
# 1.30; c=16 0.74, 0.80, 1.30 (the line 0.74-1.28). Over ten recorded sweeps the rate form holds
# all six in four, the line in none: the steadier hours only, so the first stays unmet. 5 Dec
# 08:23 (0 flagged; TPOT grew as a line, one c=4 round's TTFT half the others'): c=8 0.96, 0.72,
# 1.04; c=16 0.88, 0.64, 1.12 (the carried shape 0.94, 0.70, 1.07 and 0.84, 0.61, 1.18); each
# band now spans the line's forecast past c=4 too, and held all six rounds' means. 09:00 (0
# flagged; c=16's TTFT p50 rounds 8.0, 8.0, 18.3 ms, waves 2.6, 1.8, 4.0): c=8 0.92, 0.67,
# 1.11; c=16 1.17, 1.05, 0.84 (the band held 5 of 6). Over twelve sweeps: 4 of 12 all six.
# 5 Dec 21:30 (a fresh VM, 0 flagged): c=8 0.96, 0.89, 0.99; c=16 1.10, 0.77, 0.90, c=16's TTFT
# p50 rounds 47.7, 14.2, 45.2 ms in waves of 5.5, 2.3, 6.0: alike lengths keep the loop in
# lockstep, whose state no forecast knows. Since then the outputs spread as bench's default
# (29-35; the fit replays them so): 22:00, both tests passed (c=8 1.05, 1.04, 0.91; c=16 1.04,
# 0.99, 0.94; the carried shape 1.04, 0.99, 0.93 and 1.02, 0.94, 0.95), waves 1.2-1.6, in an
# hour whose rounds wandered in 15 of 15 figures (CV 14-32%): README for the sweeps since.
# 6 Dec 04:10, a steady sweep (4 of 15 figures wandered): c=8 1.07, 1.45, 0.89; c=16 0.97, 1.13,
# 1.01 (the carried shape: c=8 TTFT p50 1.38): the client's TTFT p50 13.6 ms at c=4, 13.1 at c=8.
# 6 Dec 10:31-11:57, five runs in a row (0 flagged each, rounds wandered in 12-15 of 15 figures):
# three passed (c=16 TTFT p50 0.89, 0.97, 0.97), two did not (c=16 TTFT p50 0.73; and c=16 1.34,
# 1.32, 0.73 in a run whose rounds knew their means to +-49-96%): the hour still decides.
# 14:41 passed (c=8 0.91, 0.96, 1.07; c=16 1.07, 1.06, 0.90): 4 of 6 that day. The API server's
# part of TTFT past c=1's grew 2.2-6.4x from c=4 to c=16 over eleven sweeps of 5-6 Dec, where the
# rate form fitted at c = 1, 2, 4 reads 2.2-3.5x (bench/front_split.py; 10:31's miss: 6.4x).
# 17:37 missed on c=16 TTFT p50 alone (0.80; the carried shape 0.82), after a ten-round sweep by
# hand whose rounds knew c=16's means to +-7-8% and the fit missed beyond them (c=16 TPOT 0.85,
# TTFT p50 0.66, tok/s 1.17). Over twelve sweeps (bench/growth_reach.py) the growth from c=4 to
# 16 ran against the growth from 1 to 4 (r -0.41 to -0.48), and the other sweeps' mean curve
# scaled to each sweep's c = 1, 2, 4 held all six in 6 of 12, the fit in 5: about one in two is
# what this host gives any forecast from c = 1, 2, 4, so the must-show 1 is reported
# blocked here and this test stays unmet (README, "What this host leaves any forecast").
pytestmark = [pytest.mark.real_server, pytest.mark.unmet]

LOAD = ("--prompt-tokens", "32", "--output-tokens", "29-35", "--endpoint", "completions")
"""Output lengths as ``infmon bench``'s default load has them (its 32 ± 10%): alike lengths put
the closed loop in lockstep waves, and c=16's TTFT p50 then moves with the loop's state from
round to round (5 Dec: 47.7, 14.2, 45.2 ms in one run, waves 5.5, 2.3, 6.0), which no forecast
meets within 15%; spread ones keep the users apart (the same evening: c=8 TTFT p50 15.0, 15.4,
14.6 ms, waves 1.2-1.3), and the fit replays the lengths as spread (``Shape.output_spread``)."""
TOLERANCE = 0.15
RETAKES = 10
"""A step the client self-check flags is run again (``--retake``): on this host a starvation
beside a real-time load thread sends it to the high fair share for the rest of the bench run, and
a step measured while the host starved may hold the client's waits."""


def bench(url: str, tmp: Path, name: str, levels: str) -> Path:
    session = tmp / name
    proc = infmon(
        "bench",
        url,
        *LOAD,
        "--ignore-eos",
        "--concurrency",
        levels,
        "--step-duration",
        "15s",
        "--repeat",
        "3",
        "--retake",
        str(RETAKES),
        "--session-dir",
        str(session),
        cwd=tmp,
        timeout_s=2100,
    )
    assert proc.returncode == 0, explain(proc)
    report = json.loads((session / "report.json").read_text())
    late = [st for st in report["steps"] if st["client_late"]]
    clean = {st["concurrency"] for st in report["steps"] if not st["client_late"]}
    # a starved client measured its own waits, not the server: `sim --fit` and this check leave
    # the steps the self-check flagged out, and each level needs one round that was not
    print(f"client self-check flagged {len(late)} of {len(report['steps'])} steps")
    assert clean >= {1, 2, 4, 8, 16}, (
        f"the client self-check flagged every round of c={sorted({1, 2, 4, 8, 16} - clean)}: "
        f"client timestamps are late on this host (load thread: "
        f"{report['target']['load_thread']})"
    )
    return session


@pytest.fixture(scope="module")
def vllm_timed(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    """vLLM that puts its own per-request timings in each stream's usage chunk."""
    with rs.serve_vllm(server_logs, per_request=True) as server:
        yield server


@pytest.fixture(scope="module")
def sweep(vllm_timed: rs.Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One bench session of c = 1, 2, 4, 8, 16 in three rounds: both checks read it."""
    return bench(vllm_timed.url, tmp_path_factory.mktemp("fit"), "sweep", "1,2,4,8,16")


def fit_and_check(session: Path, tmp: Path, *extra: str) -> list[str]:
    """``sim --fit`` at c = 1, 2, 4, then each held-out level's forecast against the mean of
    its rounds: the rows printed, and those beyond ``TOLERANCE`` returned."""
    profile = tmp / "vllm.toml"
    proc = infmon(
        "sim", "--fit", str(session), "--holdout", "8,16", "--profile-out", str(profile), *extra,
        cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    print(proc.stdout)
    cost = fitio.load(profile)
    assert cost.targets == "both"
    assert cost.fitted_range.concurrency == (1, 4)  # c = 8 and 16 held out of the fit
    measured, server = read_session(session)
    measured = [o for o in measured if o.concurrency in (8, 16)]  # the levels the fit never saw
    assert sorted({o.concurrency for o in measured}) == [8, 16]
    base = base_config([server])
    rows, misses = [], []
    for c in sorted({o.concurrency for o in measured}):
        rounds = [o for o in measured if o.concurrency == c]
        f = forecast(base, cost, rounds[0].shape)
        pairs = {
            "TPOT ms": (f.tpot_s, 1e3, [o.tpot_s * 1e3 for o in rounds]),
            "TTFT p50 ms": (f.ttft_p50_s, 1e3, [o.ttft_p50_s * 1e3 for o in rounds]),
            "output tok/s": (f.output_tok_s, 1.0, [o.output_tok_s for o in rounds]),
            "server TTFT ms (queue → first token)": (
                f.queue_ttft_mean_s,
                1e3,
                [o.server_ttft_s * 1e3 for o in rounds],
            ),
        }
        for name, (band, scale, each) in pairs.items():
            meas = statistics.fmean(each)
            ratio = band.value * scale / meas
            inside = abs(band.value * scale - meas) <= band.half_width * scale
            rows.append(
                f"c={c} {name}: forecast {band.text(scale)} measured {meas:.2f} (rounds "
                f"{', '.join(f'{x:.2f}' for x in each)}) ratio {ratio:.2f}"
                f"{'' if inside else ' (outside the band)'}"
            )
            if abs(ratio - 1) > TOLERANCE and not name.startswith("server"):
                misses.append(rows[-1])
    print("\n".join(rows))
    wander = [
        line
        for line in proc.stdout.splitlines()
        if line.startswith(("warning: rounds", "  beyond the rounds'", "  the rounds know"))
    ]
    return misses + wander if misses else []


@pytest.mark.timeout(2400)  # vLLM's start (~1-4 min), 3 rounds of 5 steps of 15 s, retakes
def test_fit_at_1_2_4_forecasts_8_and_16(sweep: Path, tmp_path: Path) -> None:
    """The issue's check as written: the fit sees c = 1, 2, 4 and nothing else, so it takes
    the growth past c=4 in the rate form (with the tokens streamed per second: the levels
    cannot show whether it slows, and this form bends by as much as they grew)."""
    misses = fit_and_check(sweep, tmp_path)
    assert not misses, "\n".join(misses)


@pytest.mark.timeout(600)
def test_with_a_wider_sweeps_shape_it_forecasts_8_and_16(sweep: Path, tmp_path: Path) -> None:
    """The same fit with the growth's shape carried from a sweep of c = 1-16 of this vLLM
    build and model on another day (the ``wandering-vllm`` fixture, 4 Dec): what an operator
    with an earlier sweep of their server does (``--shape-from``). Only the two exponents are
    carried; every cost is fitted to today's c = 1, 2, 4."""
    wide = unpack_journal("wandering-vllm", tmp_path / "wide")
    shape = tmp_path / "wide.toml"
    proc = infmon("sim", "--fit", str(wide), "--profile-out", str(shape), cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    carried = fitio.load(shape)
    assert carried.shape_from == "fitted over c=1-16" and carried.seq_exponent < 1
    misses = fit_and_check(sweep, tmp_path, "--shape-from", str(shape))
    assert not misses, "\n".join(misses)
