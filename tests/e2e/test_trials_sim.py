"""Must-show: ``--repeat 5`` on the simulator gives output tok/s at c=16 a 95 % interval and a
CV that agree with a grid of the same load measured at the same time (a round the client
self-check flags, on a loaded host, is retaken: ``--retake``); ``--until-ci`` stops before its
last round on a steady server."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from infmon.model.compare.trial_stats import ratio_ci, welch
from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
LOAD = ("--step-duration", "3", "--warmup", "1", "--output-tokens", "16-48")


def _trials(session: Path) -> dict[str, dict]:
    doc = json.loads((session / "trials.json").read_text())
    assert doc["schema"] == "infmon.trials/1"
    return {lv["level"]: lv for lv in doc["levels"]}


def _tok_s(session: Path, level: int) -> list[float]:
    steps = json.loads((session / "report.json").read_text())["steps"]
    return [
        s["output_throughput_tok_s"]
        for s in steps
        if s["concurrency"] == level and not s["client_late"]  # the trials leave those out
    ]


@pytest.mark.timeout(600)
def test_repeat_gives_an_interval_that_covers_the_grid(tmp_path):
    """The repeated run and the grid run at the same time against two simulators, so both
    see the same machine (this host's pace drifts over minutes)."""
    rep, grid = tmp_path / "repeat", tmp_path / "grid"
    with running_sim("--scenario", "baseline") as a, \
            running_sim("--scenario", "baseline") as b:  # fmt: skip
        g = subprocess.Popen(
            infmon_cmd("bench", b, "--concurrency", "8,16,32", "--repeat", "3",
                       "--session-dir", str(grid), *LOAD),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        out = subprocess.run(
            infmon_cmd("bench", a, "--concurrency", "16", "--repeat", "5", "--retake", "3",
                       "--session-dir", str(rep), *LOAD),
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        g_out, _ = g.communicate(timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert g.returncode == 0, g_out
    c16 = _trials(rep)["c=16"]
    tok = c16["figures"]["output_tok_s"]
    assert c16["n"] == 5 and tok["n"] == 5
    assert tok["ci_low"] < tok["mean"] < tok["ci_high"] and 0 < tok["cv"] < 0.5
    assert "c=16 n=5  out tok/s" in out.stdout and "cv " in out.stdout
    values = _tok_s(rep, 16)
    assert tok["mean"] == pytest.approx(sum(values) / 5, rel=1e-3)
    grid_values = _tok_s(grid, 16)
    grid_mean = sum(grid_values) / len(grid_values)
    covers = tok["ci_low"] <= grid_mean <= tok["ci_high"]
    print(f"repeat c=16: {tok['mean']:.1f} ({tok['ci_low']:.1f}–{tok['ci_high']:.1f}) "
          f"cv {tok['cv']:.1%}; grid mean {grid_mean:.1f} of {len(grid_values)}: covered {covers}")  # fmt: skip
    # The two runs agree within noise: Welch's test of their log means at 99 %. Not at the
    # product's 95 %: under identical conditions that check fails one run in twenty by its own
    # construction, and two runs beside a neighbour's load on two cores differ by ~1 % (CI, 3 Dec:
    # ratio 1.013, 95 % interval 1.002-1.025, |t| 3.1; quiet host: 834.6 vs 833.4).
    r = ratio_ci(grid_values, values)
    diff, se, df = welch(np.log(grid_values), np.log(values))  # ratio_ci's own Welch step
    assert abs(diff / se) <= _t_quantile(df, 0.995), (r, diff / se, df, values, grid_values)


def _t_quantile(df: float, q: float) -> float:
    """Student's t quantile at a fractional ``df``, by a seeded Monte Carlo (±0.5 %)."""
    return float(np.quantile(np.random.default_rng(0).standard_t(df, 4_000_000), q))


@pytest.mark.timeout(600)
def test_until_ci_stops_early_on_a_steady_server(tmp_path):
    session = tmp_path / "s"
    with running_sim("--scenario", "baseline") as url:
        out = subprocess.run(
            infmon_cmd("bench", url, "--concurrency", "8", "--repeat", "10", "--until-ci", "10%",
                       "--session-dir", str(session), *LOAD),
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    c8 = _trials(session)["c=8"]
    assert 3 <= c8["n"] < 10
    assert c8["figures"]["output_tok_s"]["ci_high"] - c8["figures"]["output_tok_s"]["mean"] <= (
        0.1 * c8["figures"]["output_tok_s"]["mean"] + 1e-6
    )
    assert f"within ±10.0% after {c8['n']} rounds" in out.stdout


@pytest.mark.timeout(300)
def test_until_ci_on_latency_says_which_level_is_still_wide(tmp_path):
    """``--until-ci-on`` waits on the named figures; a target no three rounds can meet runs
    every round asked and ends by naming each level's figure still wider than asked."""
    session = tmp_path / "s"
    with running_sim("--scenario", "baseline") as url:
        out = subprocess.run(
            infmon_cmd("bench", url, "--concurrency", "4,8", "--repeat", "3", "--until-ci",
                       "0.1%", "--until-ci-on", "ttft_p50_ms,output_tok_s",
                       "--session-dir", str(session), *LOAD),
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    trials = _trials(session)
    assert trials["c=4"]["n"] == trials["c=8"]["n"] == 3  # never tight: every round ran
    text = " ".join(line.strip() for line in out.stdout.splitlines())  # the note is wrapped
    note = text[
        text.index("trials: after 3 rounds (the most asked) not every level within ±0.1%") :
    ]
    note = note[: note.index("narrow them")]
    for level in ("c=4", "c=8"):
        for name in ("ttft_p50_ms", "output_tok_s"):
            width = trials[level]["figures"][name]
            half = (width["ci_high"] - width["ci_low"]) / 2 / width["mean"]
            assert f"{level} {name} ±{half:.1%}" in note
