"""The HTML report in headless Chromium: it renders its charts and never runs model output."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from infmon.journal import JournalWriter
from infmon.report import write_reports
from tests.synthetic import SyntheticServer, write_synthetic_session

pytestmark = pytest.mark.e2e
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
EVIL = "<script>document.title='pwned';document.body.innerHTML='pwned'</script>"


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is required (apt-get install chromium)")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'chrome-profile'}",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    session = tmp_path_factory.mktemp("html") / "session"
    write_synthetic_session(
        session,
        concurrencies=(1, 4, 16),
        step_duration_s=4.0,
        server=SyntheticServer(spec_acceptance=0.4),
    )
    with JournalWriter(session, autoflush=False) as j:
        j.write_event("mark", label=EVIL)
        j.write_quality(
            {
                "probes": 1,
                "correct": 0,
                "accuracy": 0.0,
                "results": [{"id": "p1", "expect": "42", "output": EVIL, "correct": False}],
            }
        )
    write_reports(session)
    return session / "report.html"


def test_model_output_is_escaped_in_the_file(report_html):
    text = report_html.read_text()
    assert "<script" not in text
    assert "&lt;script&gt;document.title" in text
    assert "Content-Security-Policy" in text


def test_chromium_renders_charts_and_runs_no_script(report_html, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", report_html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "pwned</title>" not in dom.stdout and "<script" not in dom.stdout
    assert "&lt;script&gt;document.title" in dom.stdout
    assert dom.stdout.count("<svg") >= 5 and "<path" in dom.stdout
    shot = tmp_path / "report.png"
    res = _chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1200,3000", report_html.as_uri()
    )
    assert res.returncode == 0, res.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 30_000
