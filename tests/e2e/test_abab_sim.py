"""Must-show: ``infmon method --abab`` between the simulator's baseline and a change, the
simulator restarted by a switch command before each run: one sentence and one JSON verdict
with speed (ratio and interval per level), the SLO frontier and quality non-inferiority; and
``--fail-if "frontier<-10%"`` exits 1 for spec-pitfall, 0 for fp8."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infmon.model.compare.ab_verdict import FrontierMove
from tests.conftest import REPO, infmon_cmd
from tests.e2e.conftest import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SWITCH = Path(__file__).with_name("simswitch.py")


def _abab(
    tmp_path: Path, change: str, rounds: int
) -> tuple[subprocess.CompletedProcess[str], dict]:
    port = free_port()
    state = tmp_path / "sim"
    switch = f"{sys.executable} {SWITCH} {state} {port} {{label}}"
    try:
        out = subprocess.run(
            infmon_cmd(
                "method",
                f"http://127.0.0.1:{port}",
                "--abab",
                f"baseline,{change}",
                "--rounds",
                str(rounds),
                "--switch-cmd",
                switch,
                "--headless",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--concurrency",
                "4,16",
                "--step-duration",
                "2",
                "--warmup",
                "0.5",
                "--output-tokens",
                "16-48",
                "--prompt-tokens",
                "512",
                "--slo",
                "ttft=500ms,tpot=50ms",
                "--search-range",
                "4-256",
                "--search-budget",
                "8",
                "--search-resolution",
                "10%",
                "--quality-margin",
                "10",
                "--fail-if",
                "frontier<-10%",
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        subprocess.run([sys.executable, str(SWITCH), str(state), str(port), "stop"], check=True)
    path = tmp_path / "runs" / f"abab-baseline-{change}" / "abab.json"
    assert path.exists(), out.stdout + out.stderr
    return out, json.loads(path.read_text())


@pytest.mark.timeout(900)
def test_abab_fp8_verdict_covers_speed_frontier_and_quality(tmp_path):
    out, doc = _abab(tmp_path, "fp8", rounds=3)
    assert out.returncode == 0, out.stdout + out.stderr
    assert doc["schema"] == "infmon.abab/1" and doc["rounds"] == 3
    assert doc["sentence"] in out.stdout and doc["sentence"].startswith("fp8: ")
    # the switch really ran: one start per side and round, A-B-A-B
    starts = [line for line in out.stdout.splitlines() if line.startswith("switching")]
    assert [s.split()[4].rstrip(":") for s in starts] == ["baseline", "fp8"] * 3
    by_level = {s["level"]: s for s in doc["speed"]}
    assert set(by_level) == {"c=4", "c=16"}
    # a round whose client was late at a level (its self-check: the step's timestamps carry
    # the client's delay) is left out with its pair, the rest stay paired by round; the
    # headline is the highest level whose speed is known, a level above it is said unmeasured
    for s in by_level.values():
        clean = 3 - s["rounds_left_out"]
        assert s["rounds"] == 3 and s["paired"] == (clean >= 2)
        assert not s["paired"] or s["n"] == clean
        if s["ci_low"] is not None:
            assert s["ci_low"] <= s["ratio"] <= s["ci_high"]
    known = [lv for lv in ("c=4", "c=16") if by_level[lv]["ratio"] is not None]
    assert doc["headline_level"] == (known[-1] if known else "c=16")
    head = by_level[doc["headline_level"]]
    for s in (head, by_level["c=16"]):  # the sentence says each level's rounds left out
        if s["rounds_left_out"]:
            assert f"({s['rounds_left_out']} of 3 rounds left out: client late)" in doc["sentence"]
    c16 = by_level["c=16"]
    assert c16["ratio"] is None or c16["ratio"] > 1.0  # FP8 weights: half the bytes per token
    # beyond noise or not (this shared host's noise decides), the sentence says which
    if head["ratio"] is None:
        word = "speed not measured"
    elif not head["beyond_noise"]:
        word = "no faster or slower beyond noise"
    else:
        word = "faster" if head["ratio"] >= 1 else "slower"
    assert f"{word}" in doc["sentence"] and f"at {doc['headline_level']}" in doc["sentence"]
    print(doc["sentence"])
    f = doc["frontier"]
    assert f["a"] is not None and f["b"] is not None and f["b"] >= f["a"]
    move = FrontierMove(f["a"], f["b"], f["a_open"], f["b_open"])
    assert move.text() in doc["sentence"]
    q = doc["quality"]
    assert q["probes"] >= 40 and q["margin_points"] == 10
    assert q["diff_points"] == pytest.approx(
        (q["b_correct"] - q["a_correct"]) / q["probes"] * 100, abs=0.01
    )
    assert q["ci_low_points"] <= q["diff_points"] <= q["ci_high_points"]
    assert q["verdict"] in doc["sentence"] or "not shown" in doc["sentence"]
    assert doc["failed_rules"] == []


@pytest.mark.timeout(600)
def test_abab_fail_if_frontier_catches_spec_pitfall(tmp_path):
    out, doc = _abab(tmp_path, "spec-pitfall", rounds=1)
    assert out.returncode == 1, out.stdout + out.stderr
    assert doc["frontier"]["change"] is not None and doc["frontier"]["change"] < -0.10
    assert doc["failed_rules"] and "frontier<-10%" in out.stderr
    late = doc["speed"][-1]["rounds_left_out"]  # c=16's one round: its client late, left out
    assert "slower" in doc["sentence"] or (late and "left out: client late" in doc["sentence"])
