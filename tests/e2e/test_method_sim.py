"""The operator's method, headless, on the simulator: baseline, spec-pitfall and fp8 runs with
the same load, quality probes on each, then ``infmon compare`` must name the speculative-decoding
regression with its cause and the FP8 speed-up with its quality cost, from measured data."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SCENARIOS = ("baseline", "spec-pitfall", "fp8")


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    out = subprocess.run(
        infmon_cmd(*args), cwd=REPO, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, f"infmon {' '.join(args)}:\n{out.stdout}\n{out.stderr}"
    return out


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("method")
    for sc in SCENARIOS:
        session = root / sc
        with running_sim("--scenario", sc, "--seed", "1") as url:
            _run(
                "bench",
                url,
                "--concurrency",
                "1,4,16",
                "--step-duration",
                "4",
                "--warmup",
                "1",
                "--output-tokens",
                "64",
                "--session-dir",
                str(session),
                "--label",
                sc,
            )
            extra = ["--baseline", str(root / "baseline")] if sc != "baseline" else []
            _run("quality", url, "--session-dir", str(session), *extra)
        _run("report", str(session))
    return root


def test_compare_names_spec_regression_and_fp8_speedup_with_quality_cost(sessions):
    out = _run("compare", *(str(sessions / sc) for sc in SCENARIOS), "--json")
    doc = json.loads(out.stdout)
    text = "\n".join(doc["explanations"])
    spec = [line for line in doc["explanations"] if line.startswith("spec-pitfall")]
    fp8 = [line for line in doc["explanations"] if line.startswith("fp8")]
    scraped = [
        json.loads((sessions / sc / "report.json").read_text())["server_timeline"]
        for sc in SCENARIOS
    ]
    assert all(scraped), "bench recorded no server scrapes (needs MetricPoller → write_scrape)"
    assert any("spec decoding: acceptance" in line and "single-stream" in line for line in spec), (
        text
    )
    assert any("faster than baseline" in line for line in fp8), text
    assert any("quality" in line and "accuracy" in line for line in fp8), text
    base = doc["steps"][0]["runs"]
    assert base[1]["tok_s"]["delta_pct"] < -40, base
