"""``infmon bench --search`` against the simulator: each probe an ordinary step, the chart as it
goes, one verdict line and a search.json that parses with its documented schema."""

from __future__ import annotations

import json
import subprocess

import pytest

from infmon.model.search.search_json import parse_search_doc
from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e]

LOAD = ("--prompt-tokens", "512", "--output-tokens", "12-20")


def _bench(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        infmon_cmd("bench", *args), cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_search_slo_writes_its_verdict_and_chart(tmp_path):
    session = tmp_path / "s"
    with running_sim("--scenario", "baseline") as url:
        out = _bench(
            url, "--search", "slo", "--slo", "ttft=500ms,tpot=50ms", "--search-range", "4-256",
            "--search-budget", "6", "--step-duration", "2", "--warmup", "0.5",
            "--session-dir", str(session), *LOAD,
        )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    doc = parse_search_doc(json.loads((session / "search.json").read_text()))
    assert doc["goal"] == "slo" and doc["mode"] == "concurrency"
    assert doc["slo"] == {"ttft_s": 0.5, "tpot_s": 0.05, "e2el_s": None}
    assert 2 <= len(doc["probes"]) <= 6
    assert out.stdout.count("search ") >= len(doc["probes"])  # the move before each probe
    assert doc["line"] in out.stdout and "tok/s per user" in out.stdout
    report = json.loads((session / "report.json").read_text())
    levels = [s["concurrency"] for s in report["steps"]]
    assert levels == [p["level"] for p in doc["probes"]]  # every probe is a step of the session
    assert [p["step"] for p in doc["probes"]] == [s["step"] for s in report["steps"]]
    if doc["status"] == "found":
        assert doc["found"]["fitted_attainment"] >= 0.9 > doc["bound"]["fitted_attainment"]


def test_search_needs_an_slo_and_a_level_range():
    out = _bench("http://127.0.0.1:9", "--search", "slo")
    assert out.returncode == 2 and "--search slo needs --slo" in out.stderr
    out = _bench("http://127.0.0.1:9", "--search", "knee", "--search-by", "rate")
    assert out.returncode == 2 and "--search knee runs in concurrency" in out.stderr
    out = _bench("http://127.0.0.1:9", "--search", "goodput", "--search-range", "9-3")
    assert out.returncode == 2 and "need 0 < LO < HI" in out.stderr
