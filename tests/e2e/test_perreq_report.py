"""A spec run's report (issue 28, must show 4): the per-task acceptance from each request's own
figures, the best- and worst-fitting task kinds, and each step's latency anatomy.

`infmon sim --scenario spec-good --enable-per-request-metrics --per-request-spec-decode-metrics
summary`; `infmon bench` with the built-in corpus (summaries, questions, code, chat turns) at
c=1 and c=4; the report then reads the journal.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e]


def test_a_spec_runs_report_names_the_acceptance_per_task_and_the_drafters_fit(
    tmp_path: Path,
) -> None:
    session = tmp_path / "session"
    flags = ("--enable-per-request-metrics", "--per-request-spec-decode-metrics", "summary")
    with running_sim("--scenario", "spec-good", "--seed", "5", *flags) as url:
        bench = subprocess.run(
            infmon_cmd(
                "bench",
                url,
                "--concurrency",
                "1,4",
                "--step-requests",
                "40",
                "--output-tokens",
                "32",
                "--prompt-tokens",
                "256",
                "--session-dir",
                str(session),
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert bench.returncode == 0, bench.stderr[-3000:]
    assert "server timings: per request" in bench.stdout + bench.stderr
    out = tmp_path / "report"
    r = subprocess.run(
        infmon_cmd("report", str(session), "--out", str(out)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads((out / "report.json").read_text())
    section = doc["per_request"]
    tasks = {g["name"]: g for g in section["acceptance_by_task"]}
    assert len(tasks) >= 3, tasks
    assert sum(g["requests"] for g in tasks.values()) >= 70
    for g in tasks.values():
        assert 0 < g["rate"] < 1 and g["accepted"] <= g["drafted"]
    best, worst = section["best_task"], section["worst_task"]
    assert best in tasks and worst in tasks and best != worst
    assert tasks[best]["rate"] >= tasks[worst]["rate"]
    assert [s["label"] for s in section["steps"]] == ["c=1", "c=4"]
    md = (out / "report.md").read_text()
    assert "Speculative decoding by task kind" in md
    assert f"{tasks[best]['rate']:.2f}" in md and "Drafter fit" in md
    assert section["drafter_fit"] in md
    print(md[md.index("## Per request") :])
