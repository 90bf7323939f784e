"""`infmon sim --fit` on a session recorded against the simulator over HTTP, then `--predict
--fitted` on the profile it wrote, and `--holdout` on a level the fit never saw."""

from __future__ import annotations

import subprocess

import pytest

from infmon.commands.simfit_read import base_config, read_session
from infmon.sim import fitio
from infmon.sim.costmodel import PARAMS
from infmon.sim.fit import fit
from tests.conftest import REPO, infmon_cmd, running_sim

# a 4-level bench, then fits (~45 s), shared by the tests: on one worker (--dist loadgroup)
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("sim_fit_cli")]


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


@pytest.fixture(scope="module")
def timed_session(tmp_path_factory):
    """The same levels against a simulator that sends its per-request timings (vLLM's
    ``--enable-per-request-metrics``): each record carries the server's own queue, prefill and
    inter-token times."""
    out = tmp_path_factory.mktemp("fit-timed") / "timed"
    with running_sim("--scenario", "baseline", "--enable-per-request-metrics") as url:
        proc = run(
            "bench", url, "--concurrency", "1,2,4", "--step-duration", "4s", "--warmup", "1s",
            "--prompt-tokens", "64", "--output-tokens", "24", "--ignore-eos",
            "--session-dir", str(out),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def residuals(session_dir, targets: str) -> dict[tuple[int, str], float]:
    """The fit's relative residual per (level, figure), as `sim --fit` computes them."""
    obs, server = read_session(session_dir, targets)
    result = fit(base_config([server]), obs)
    return {(r.observation.concurrency, r.figure): r.relative for r in result.residuals}


def test_targets_server_fits_the_servers_own_timings(timed_session, session, tmp_path):
    """``--targets server`` fits TTFT (from the scheduler's queue) and TPOT to the server's
    per-request timings; the decode step it finds is the one the client's streams give (the
    simulator's client is not starved), and the profile says whose figures it fitted."""
    prof_s, prof_c = tmp_path / "server.toml", tmp_path / "client.toml"
    srv = run(
        "sim", "--fit", str(timed_session), "--targets", "server", "--profile-out", str(prof_s)
    )
    assert srv.returncode == 0, srv.stderr
    assert "the server's own per-request timings" in srv.stdout
    cli = run(
        "sim", "--fit", str(timed_session), "--targets", "client", "--profile-out", str(prof_c)
    )
    assert cli.returncode == 0, cli.stderr
    assert "the client's streams" in cli.stdout
    by_server, by_client = fitio.load(prof_s), fitio.load(prof_c)
    assert (by_server.targets, by_client.targets) == ("server", "client")
    assert 'targets = "server"' in prof_s.read_text()
    step = by_server.value("step_s") + by_server.value("weights_s")
    assert step == pytest.approx(by_client.value("step_s") + by_client.value("weights_s"), rel=0.1)
    # every figure within 10%: the replay stamps a request queued when a step takes it in, as
    # vLLM and the simulator do, and counts the mean wait for the step in progress (half of it)
    # where its closed loop would land every request at the same point in a step (before,
    # the queue wait missed by up to 26% and the client's TTFT by up to 12.3%; now 2.5% here)
    for (c, figure), rel in residuals(timed_session, "server").items():
        assert abs(rel) < 0.1, (c, figure, rel)
    auto = run("sim", "--fit", str(timed_session), "--profile-out", str(tmp_path / "a.toml"))
    assert auto.returncode == 0, auto.stderr
    # auto: both where the server sends its timings; their gap is the API server's
    assert "the client's streams and the server's own per-request timings" in auto.stdout
    assert "server TPOT ms" in auto.stdout
    by_both = fitio.load(tmp_path / "a.toml")
    assert by_both.targets == "both"
    for (c, figure), rel in residuals(timed_session, "both").items():  # the same, both clocks
        assert abs(rel) < 0.1, (c, figure, rel)
    assert by_both.sources[PARAMS.index("frontend_stream_s")] == timed_session.name
    untimed = run("sim", "--fit", str(session), "--targets", "server")
    assert untimed.returncode != 0
    assert "--enable-per-request-metrics" in untimed.stderr
