"""A spec run's report (issue 28, must show 4): the per-task acceptance from each request's own
figures, the best- and worst-fitting task kinds, and each step's latency anatomy.

`infmon sim --scenario spec-good --enable-per-request-metrics --per-request-spec-decode-metrics
summary`; `infmon bench` with the built-in corpus (summaries, questions, code, chat turns) at
c=4 and c=8; the report then reads the journal. The same bench against the baseline scenario
(no drafter) and ``infmon compare`` of the two: the spec run's explanation names the fit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e]


def _bench(url: str, session: Path) -> None:
    bench = subprocess.run(
        infmon_cmd(
            "bench",
            url,
            "--concurrency",
            "4,8",
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


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_a_spec_runs_report_names_the_acceptance_per_task_and_the_drafters_fit(
    tmp_path: Path,
) -> None:
    session, base = tmp_path / "spec", tmp_path / "base"
    flags = ("--enable-per-request-metrics", "--per-request-spec-decode-metrics", "summary")
    with running_sim("--scenario", "spec-good", "--seed", "5", *flags) as url:
        _bench(url, session)
    with running_sim("--scenario", "baseline", "--seed", "5", *flags) as url:
        _bench(url, base)
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
    assert [s["label"] for s in section["steps"]] == ["c=4", "c=8"]
    md = (out / "report.md").read_text()
    assert "Speculative decoding by task kind" in md
    assert f"{tasks[best]['rate']:.2f}" in md and "Drafter fit" in md
    assert section["drafter_fit"] in md
    detail = {r["label"]: r for r in doc["server_detail"]}
    assert set(detail) == {"c=4", "c=8"}  # the simulator publishes vLLM's 2026 families
    assert all(r["prompt_from_cache"] is not None for r in detail.values())
    assert "## Server queue and cache sources" in md
    print(md[md.index("## Per request") :])
    cmp = subprocess.run(
        infmon_cmd("compare", str(base), str(session), "--json"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cmp.returncode == 0, cmp.stderr
    data = json.loads(cmp.stdout)
    assert data["runs"][1]["acceptance_by_task"] == {n: g["rate"] for n, g in tasks.items()}
    assert data["runs"][0]["drafter_fit"] is None  # no drafter, no acceptance
    assert any(section["drafter_fit"] in line for line in data["explanations"])
