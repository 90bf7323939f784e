"""Terminal escape injection: a model id, streamed text, an error body and reason phrase, metric
labels, HELP text and a version string carrying OSC/CSI/C1/bidi sequences.

Each test runs the real command against the hostile server and asserts that no raw control or
bidi character reaches stdout/stderr or a report file, that the hostile value still shows
(escaped, so the operator sees what the server sent), the exit code, and the peak RSS.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.hostile.kit import assert_clean, assert_clean_run, bench, error_kinds, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e
SHOWN = "hostile\\x1b]0;PWNED-TITLE\\x07"
"""How the payload's start must appear: escaped, visible."""


def _assert_reports_clean(session: Path) -> None:
    """report.md and report.html hold no raw control character; every SVG chart is valid XML."""
    md = (session / "report.md").read_text(encoding="utf-8")
    assert_clean(md, "report.md")
    html = (session / "report.html").read_text(encoding="utf-8")
    assert_clean(html, "report.html")
    charts = re.findall(r"<svg\b.*?</svg>", html, flags=re.S)
    assert charts
    for chart in charts:
        ET.fromstring(chart)  # raises on invalid XML


def test_bench_with_a_hostile_model_id(tmp_path: Path) -> None:
    with serve("escape-model") as (url, _):
        ran = bench(url, tmp_path / "s", home=tmp_path)
    assert ran.returncode == 0
    assert_clean_run(ran)
    assert SHOWN in ran.stdout  # the target line names the model, escaped
    _assert_reports_clean(tmp_path / "s")
    assert SHOWN in (tmp_path / "s" / "report.md").read_text()


def test_bench_with_hostile_error_bodies_and_reason_phrases(tmp_path: Path) -> None:
    """Every request after the probe fails with a hostile 500: no request succeeded → exit 2,
    one clean line naming the error; the failures are counted by kind in the record."""
    with serve("escape-error") as (url, srv):
        ran = bench(url, tmp_path / "s", home=tmp_path)
    assert srv.generation_count > 3
    assert ran.returncode == 2, ran.show()
    assert_clean_run(ran)
    error_lines = [x for x in ran.stderr.splitlines() if x.startswith("infmon: error:")]
    assert len(error_lines) == 1 and "no request succeeded" in error_lines[0]
    kinds = error_kinds(tmp_path / "s")
    assert sum(kinds.values()) > 3 and set(kinds) <= {"http", "protocol", "cancelled"}, kinds
    _assert_reports_clean(tmp_path / "s")


def test_scrape_with_hostile_labels_help_and_version(tmp_path: Path) -> None:
    with serve("escape-metrics") as (url, _):
        text = run_infmon("scrape", url, home=tmp_path)
        as_json = run_infmon("scrape", url, "--json", home=tmp_path)
    for ran in (text, as_json):
        assert ran.returncode == 0
        assert_clean_run(ran)
    assert SHOWN in text.stdout  # the model (from the labels) and the version, escaped
    doc = json.loads(as_json.stdout)
    assert any(m.startswith("hostile\\x1b]0;") for m in doc["models"])
    assert doc["cache_config"]["cache_dtype"].startswith("hostile\\x1b")
    assert doc["backend_version"].startswith("hostile\\x1b")
    assert_clean(json.dumps(doc, ensure_ascii=False), "the parsed --json values")


def test_quality_with_hostile_streamed_text(tmp_path: Path) -> None:
    probes = tmp_path / "probes.jsonl"
    probes.write_text(
        "\n".join(
            json.dumps({"id": f"p{i}", "prompt": f"say {i}", "expect": str(i)}) for i in range(3)
        )
        + "\n"
    )
    session = tmp_path / "q"
    with serve("escape-text") as (url, _):
        human = run_infmon("quality", url, "--probes", str(probes), home=tmp_path)
        as_json = run_infmon(
            "quality",
            url,
            "--probes",
            str(probes),
            "--json",
            "--session-dir",
            str(session),
            home=tmp_path,
        )
    for ran in (human, as_json):
        assert ran.returncode == 0, ran.show()
        assert_clean_run(ran)
    assert "hostile\\x1b]0;" in human.stdout  # the wrong answers are shown, escaped
    doc = json.loads(as_json.stdout)
    outputs = [r["output"] for r in doc["results"]]
    assert all(o.startswith("hostile\\x1b]0;") for o in outputs), outputs
    assert_clean(json.dumps(doc, ensure_ascii=False), "quality --json values")
    stored = json.loads((session / "quality.json").read_text())
    assert_clean(json.dumps(stored, ensure_ascii=False), "quality.json values")


def test_report_and_compare_of_hostile_sessions(tmp_path: Path) -> None:
    """Sessions recorded against hostile servers: `report` rebuilds clean reports with valid
    SVG, `compare` prints clean text and writes a clean page."""
    sessions = []
    for mode in ("escape-model", "escape-metrics"):
        with serve(mode) as (url, _):
            ran = bench(url, tmp_path / mode, home=tmp_path)
        assert ran.returncode == 0, ran.show()
        sessions.append(tmp_path / mode)
    for s in sessions:
        ran = run_infmon("report", str(s), home=tmp_path)
        assert ran.returncode == 0
        assert_clean_run(ran)
        _assert_reports_clean(s)
    page = tmp_path / "compare.html"
    ran = run_infmon("compare", *map(str, sessions), "--html", str(page), home=tmp_path)
    assert ran.returncode == 0, ran.show()
    assert_clean_run(ran)
    assert_clean(page.read_text(encoding="utf-8"), "compare.html")
    as_json = run_infmon("compare", *map(str, sessions), "--json", home=tmp_path)
    assert as_json.returncode == 0
    assert_clean_run(as_json)
    json.loads(as_json.stdout, parse_constant=_no_constants)


def _no_constants(name: str) -> None:
    raise AssertionError(f"invalid JSON constant {name}")
