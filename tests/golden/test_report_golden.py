"""Golden Markdown and JSON reports of a fixed synthetic session (regenerate: UPDATE_GOLDEN=1)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from infmon.report import write_reports
from tests.synthetic import SyntheticServer, write_synthetic_session

HERE = Path(__file__).parent
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> Path:
    session = tmp_path_factory.mktemp("golden") / "session"
    write_synthetic_session(
        session,
        concurrencies=(1, 4, 16, 64),
        step_duration_s=6.0,
        server=SyntheticServer(spec_acceptance=0.5),
        seed=7,
        loop_lag_ms_per_stream=1.0,
    )
    write_reports(session)
    return session


def _stable_json(path: Path) -> dict:
    doc = json.loads(path.read_text())
    doc["session"]["dir"] = "<session>"
    doc["session"]["started_wall_s"] = None
    doc["events"] = [{k: v for k, v in e.items() if k != "wall"} for e in doc["events"]]
    return doc


def _check(name: str, actual: str) -> None:
    golden = HERE / name
    if UPDATE or not golden.exists():
        golden.write_text(actual)
    assert actual == golden.read_text(), f"{name} changed; review, then UPDATE_GOLDEN=1"


def test_markdown_report_matches_golden(reports):
    _check("report.md.golden", (reports / "report.md").read_text())


def test_json_report_matches_golden(reports):
    _check(
        "report.json.golden",
        json.dumps(_stable_json(reports / "report.json"), indent=1, sort_keys=True) + "\n",
    )


def test_json_report_holds_bench_steps_shape(reports):
    doc = json.loads((reports / "report.json").read_text())
    assert doc["schema"] == "infmon.report/1"
    assert [s["concurrency"] for s in doc["steps"]] == [1, 4, 16, 64]
    for s in doc["steps"]:
        for key in (
            "duration_s",
            "completed",
            "failed",
            "output_throughput_tok_s",
            "request_throughput_req_s",
            "goodput_req_s",
            "achieved_concurrency",
        ):
            assert key in s
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
            assert set(s[key]) >= {"mean", "p50", "p90", "p95", "p99"}
    assert "knee" in doc and "slo_max_concurrency" in doc
