"""``compare`` over repeated trials: two runs made with ``bench --repeat 3`` against two
simulators (the baseline and the spec-pitfall scenario) are compared by their trials (the ratio
of trial means, its interval from the spread between trials) and say so; a run without trials
against the same baseline keeps the within-run bootstrap."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from infmon.model.compare.trial_stats import ratio_ci
from tests.conftest import REPO, infmon_cmd, running_sim

# sessions shared by the tests: on one worker of the slow tier (--dist loadgroup)
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("compare_trials")]
LOAD = ("--concurrency", "4,8", "--step-duration", "3", "--warmup", "1",
        "--output-tokens", "16-48")  # fmt: skip


def _bench(url: str, session: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        infmon_cmd("bench", url, *LOAD, "--session-dir", str(session), *extra),
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _done(p: subprocess.Popen[str]) -> None:
    out, _ = p.communicate(timeout=600)
    assert p.returncode == 0, out


def _compare(*runs: Path, json_out: bool = False) -> str:
    out = subprocess.run(
        infmon_cmd("compare", *map(str, runs), *(["--json"] if json_out else [])),
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def _trial_tok_s(session: Path, c: int) -> list[float]:
    """The level's trials whose client kept time (a late one is left out of the comparison)."""
    trials = json.loads((session / "trials.json").read_text())
    names = next(lv["steps"] for lv in trials["levels"] if lv["level"] == f"c={c}")
    steps = json.loads((session / "report.json").read_text())["steps"]
    return [
        s["output_throughput_tok_s"]
        for s in steps
        if s["step"] in names and s.get("client_late") is not True
    ]


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp-trials")
    base, pit, once = root / "base", root / "pitfall", root / "once"
    with running_sim("--scenario", "baseline") as a, running_sim("--scenario", "spec-pitfall") as b:
        pa, pb = _bench(a, base, "--repeat", "3"), _bench(b, pit, "--repeat", "3")
        _done(pa)
        _done(pb)
        _done(_bench(a, once))
    return base, pit, once


@pytest.mark.timeout(900)
def test_runs_with_trials_are_compared_over_their_trials(sessions):
    base, pit, _ = sessions
    text = _compare(base, pit)
    doc = json.loads(_compare(base, pit, json_out=True))
    note = doc["trials_notes"][0]
    assert f"over trials: pitfall vs base: {note}" in text, text
    assert "noise test at those levels: over repeated trials" in text
    a, b = _trial_tok_s(base, 8), _trial_tok_s(pit, 8)
    if len(a) < 2 or len(b) < 2:  # this host made the client late: said, bootstrap kept
        assert "c=8 not over trials: the client was late" in note
        pytest.skip(f"the client was late in c=8's trials on this host: {note}")
    n = {"level": "c=8", "base_trials": len(a), "run_trials": len(b)}
    assert n in doc["over_trials"][0]
    c8 = next(s for s in doc["steps"] if s["level"] == "c=8")
    own, other = c8["runs"]
    # the baseline's row and the delta are the trial means, the interval Welch's over trials
    assert own["tok_s"]["value"] == pytest.approx(sum(a) / len(a), rel=1e-9)
    tok = other["tok_s"]
    assert tok["base"] == pytest.approx(sum(a) / len(a), rel=1e-9)
    assert tok["value"] == pytest.approx(sum(b) / len(b), rel=1e-9)
    r = ratio_ci(a, b, paired=False)
    lo, hi = tok["ci_pct"]
    assert lo <= tok["delta_pct"] <= hi
    shown = (sum(b) / len(b)) / (sum(a) / len(a))
    assert (hi - lo) / 100 == pytest.approx((r.high - r.low) * shown / r.ratio)
    print(f"c=8 tok/s base {a} pitfall {b}: {tok['delta_pct']:+.1f}% ({lo:+.1f}…{hi:+.1f})")
    # spec-pitfall is several times slower: beyond the run-to-run noise of 3 trials
    assert tok["delta_pct"] < -30 and tok["beyond_noise"] is True


@pytest.mark.timeout(900)
def test_a_run_without_trials_keeps_the_within_run_bootstrap(sessions):
    base, _, once = sessions
    text = _compare(base, once)
    assert "over trials" not in text and "noise test: bootstrap" in text, text
    doc = json.loads(_compare(base, once, json_out=True))
    assert doc["over_trials"] == [[]]
