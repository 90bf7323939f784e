"""Golden Markdown and JSON reports of three recorded sessions (issue 32, must show 3).

Each session in ``tests/fixtures/sessions`` was written by infmon itself (see its
``.source.txt``); its reports are rebuilt from the journal and compared byte for byte with the
goldens made before the step model's refactor (regenerate: UPDATE_GOLDEN=1, after reading the
diff)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from infmon.report import write_reports

HERE = Path(__file__).parent / "recorded"
SESSIONS = Path(__file__).parents[1] / "fixtures" / "sessions"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
RECORDED = ("bench-sim", "monitor-sim", "jsonl-v1")


@pytest.fixture(scope="module", params=RECORDED)
def reports(request, tmp_path_factory) -> tuple[str, Path]:
    name = request.param
    session = tmp_path_factory.mktemp("recorded") / name
    shutil.copytree(SESSIONS / name, session)
    write_reports(session)
    return name, session


def _stable_json(path: Path) -> str:
    doc = json.loads(path.read_text())
    doc["session"]["dir"] = "<session>"
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _check(name: str, actual: str) -> None:
    golden = HERE / name
    if UPDATE or not golden.exists():
        golden.write_text(actual)
    assert actual == golden.read_text(), f"{name} changed; review, then UPDATE_GOLDEN=1"


def test_recorded_markdown_report_matches_golden(reports):
    name, session = reports
    _check(f"{name}.report.md.golden", (session / "report.md").read_text())


def test_recorded_json_report_matches_golden(reports):
    name, session = reports
    _check(f"{name}.report.json.golden", _stable_json(session / "report.json"))
