"""`infmon sim --fit` on a session recorded against the simulator over HTTP, then `--predict
--fitted` on the profile it wrote, and `--holdout` on a level the fit never saw."""

from __future__ import annotations

import subprocess

import pytest

from infmon.sim import fitio
from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a 4-level bench, then fits: ~45 s


def run(*args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        infmon_cmd(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout_s
    )


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit") / "session"
    with running_sim("--scenario", "baseline") as url:
        proc = run(
            "bench",
            url,
            "--concurrency",
            "1,2,4,8",
            "--step-duration",
            "4s",
            "--warmup",
            "1s",
            "--prompt-tokens",
            "64",
            "--output-tokens",
            "24",
            "--ignore-eos",
            "--session-dir",
            str(out),
        )
    assert proc.returncode == 0, proc.stderr
    return out


def test_fit_prints_costs_residuals_and_writes_the_profile(session, tmp_path):
    profile = tmp_path / "p.toml"
    proc = run("sim", "--fit", str(session), "--holdout", "8", "--profile-out", str(profile))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "step_s" in out and "request_s" in out and "residuals per step" in out
    rows = [line.split() for line in out.splitlines() if line.startswith("  session ")]
    assert sorted(int(r[1]) for r in rows if r[1].isdigit()) == [
        1,
        2,
        4,
    ]  # one residual row per fitted level
    assert "held out" in out and "c=8" in out
    cost = fitio.load(profile)
    assert cost.fitted_range.concurrency == (1, 4)
    assert cost.kv_capacity_tokens > 0  # from cache_config_info
    assert cost.sources[0] == "session" and cost.stderr("step_s") > 0
    text = profile.read_text()
    assert "[params.step_s]" in text and "stderr" in text and 'sessions = "session"' in text


def test_predict_on_the_fitted_profile_gives_bands_and_says_when_it_extrapolates(session, tmp_path):
    profile = tmp_path / "p.toml"
    assert run("sim", "--fit", str(session), "--profile-out", str(profile)).returncode == 0
    inside = run("sim", "--predict", "--fitted", str(profile), "--concurrency", "4")
    assert inside.returncode == 0, inside.stderr
    assert "±" in inside.stdout and "outside the fitted range" not in inside.stdout
    far = run("sim", "--predict", "--fitted", str(profile), "--concurrency", "64")
    assert "outside the fitted range: concurrency 64 is outside the fitted 1-8" in far.stdout
    longer = run(
        "sim",
        "--predict",
        "--fitted",
        str(profile),
        "--concurrency",
        "2",
        "--prompt-tokens",
        "2000",
    )
    assert "prompt of 2000 tokens" in longer.stdout


def test_a_drafter_what_if_needs_its_cost(session, tmp_path):
    profile = tmp_path / "p.toml"
    assert run("sim", "--fit", str(session), "--profile-out", str(profile)).returncode == 0
    no_cost = run(
        "sim",
        "--predict",
        "--fitted",
        str(profile),
        "--concurrency",
        "2",
        "--speculative-k",
        "3",
        "--acceptance",
        "0.7",
    )
    assert no_cost.returncode != 0 and "--draft-cost" in no_cost.stderr
    spec = run(
        "sim",
        "--predict",
        "--fitted",
        str(profile),
        "--concurrency",
        "2",
        "--speculative-k",
        "3",
        "--acceptance",
        "0.7",
        "--draft-cost",
        "0.1",
    )
    assert spec.returncode == 0, spec.stderr
    assert "spec k=3" in spec.stdout and "speculative decoding k=3" in spec.stdout
