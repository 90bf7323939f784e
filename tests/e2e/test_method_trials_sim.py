"""``infmon method --repeat 3``, headless, on the simulator: the baseline and a change each run
their sweep three times in rounds (``trials.json`` in each session), and the method's
comparison (``runs/compare.txt``/``.json``) reads them over their trials and says so."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
SIDES = ("baseline", "spec-pitfall")
LOAD = ("--concurrency", "4,16", "--step-duration", "3", "--warmup", "1",
        "--output-tokens", "16-48")  # fmt: skip


@pytest.mark.timeout(900)
def test_method_with_repeat_compares_over_trials(tmp_path):
    for sc in SIDES:
        with running_sim("--scenario", sc) as url:
            extra = ("--baseline", "runs/baseline") if sc != "baseline" else LOAD
            out = subprocess.run(
                infmon_cmd("method", url, "--headless", "--no-quality", "--label", sc,
                           "--repeat", "3", *extra),
                cwd=tmp_path, capture_output=True, text=True, timeout=600,
            )  # fmt: skip
        assert out.returncode == 0, out.stdout + out.stderr
        trials = json.loads((tmp_path / "runs" / sc / "trials.json").read_text())
        assert [lv["n"] for lv in trials["levels"]] == [3, 3]
    text = (tmp_path / "runs" / "compare.txt").read_text()
    print(text)
    doc = json.loads((tmp_path / "runs" / "compare.json").read_text())
    note = doc["trials_notes"][0]
    assert f"over trials: spec-pitfall vs baseline: {note}" in text
    assert "noise test at those levels: over repeated trials" in text
    over = {t["level"]: t for t in doc["over_trials"][0]}
    for level in ("c=4", "c=16"):
        (na, la), (nb, lb) = (_trials(tmp_path / "runs" / sc, level) for sc in SIDES)
        if min(na, nb) >= 2:  # compared over the trials whose client kept time
            assert over[level] == {"level": level, "base_trials": na, "run_trials": nb}
            c = next(s for s in doc["steps"] if s["level"] == level)["runs"][1]["tok_s"]
            assert c["ci_pct"][0] <= c["delta_pct"] <= c["ci_pct"][1] and c["beyond_noise"]
        else:  # this host made the client late: the bootstrap stays, and it says why
            assert level not in over and f"{level} not over trials: the client was late" in note
        if la or lb:
            assert "the client was late in" in note
    assert over  # at least one level over trials (spec-pitfall is ~3x slower: beyond noise)


def _trials(session, level: str) -> tuple[int, int]:
    """The level's trials whose client kept time, and those it was late in (report.json)."""
    names = next(
        lv["steps"]
        for lv in json.loads((session / "trials.json").read_text())["levels"]
        if lv["level"] == level
    )
    steps = json.loads((session / "report.json").read_text())["steps"]
    late = sum(1 for s in steps if s["step"] in names and s.get("client_late") is True)
    return len(names) - late, late
