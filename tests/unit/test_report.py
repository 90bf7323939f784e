"""Report writers: files, CSV rows, caveats, escaping, the CLI."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from infmon.journal import JournalWriter
from infmon.report import write_reports
from infmon.report.markdown import md_escape
from infmon.report.svg import Chart, Series, render
from tests.conftest import REPO, infmon_cmd
from tests.synthetic import write_synthetic_session


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("rep") / "s"
    n = write_synthetic_session(path, concurrencies=(2, 8), step_duration_s=4, finish=False)
    return path, n


def test_write_reports_to_out_dir(session, tmp_path):
    path, n = session
    files = write_reports(path, tmp_path / "out", screenshot_svg="<svg xmlns='x'></svg>")
    names = sorted(p.name for p in files)
    assert names == ["report.html", "report.json", "report.md", "requests.csv", "screenshot.svg"]
    with open(tmp_path / "out" / "requests.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == n
    assert {r["concurrency"] for r in rows} == {"2", "8"}
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["session"]["requests"] == n
    assert sum(s["completed"] + s["warmup_excluded"] for s in doc["steps"]) == n
    assert any("did not end cleanly" in c for c in doc["caveats"])
    assert "data:image/svg+xml;base64," in (tmp_path / "out" / "report.html").read_text()
    assert not (path / "report.md").exists()


def test_secrets_never_reach_reports(session, tmp_path):
    path, _ = session
    write_reports(path, tmp_path)
    for name in ("report.json", "report.md", "report.html"):
        assert "sk-never-written" not in (tmp_path / name).read_text()


def test_labels_are_escaped_everywhere(tmp_path):
    write_synthetic_session(tmp_path, concurrencies=(2,), step_duration_s=3)
    with JournalWriter(tmp_path, autoflush=False) as j:
        j.write_event("mark", label="a|b <img src=x onerror=alert(1)>")
    write_reports(tmp_path)
    md = (tmp_path / "report.md").read_text()
    html = (tmp_path / "report.html").read_text()
    assert "<img" not in md and "<img" not in html
    assert "a\\|b &lt;img" in md
    assert md_escape("x\ny|`") == "x y\\|\\`"


def test_svg_skips_missing_values_and_escapes_titles():
    svg = render(
        Chart("<t>", "x", "y", (Series("s&", (1, 2, 3, 4), (1.0, None, float("nan"), 4.0)),))
    )
    assert "&lt;t&gt;" in svg and "s&amp;" in svg
    assert svg.count("M") >= 2


def test_cli_report(session, tmp_path):
    path, _ = session
    out = subprocess.run(
        infmon_cmd("report", str(path), "--out", str(tmp_path)),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "report.html").exists()
    bad = subprocess.run(
        infmon_cmd("report", str(tmp_path / "nope")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "not a session directory" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_md_escape_never_makes_a_link() -> None:
    assert md_escape("[x](javascript:alert(1))") == "\\[x](javascript:alert(1))"
    assert md_escape("![i](http://h/p.png)") == "!\\[i](http://h/p.png)"
