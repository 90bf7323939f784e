"""The HTML report in headless Chromium: it renders its charts and never runs model output."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from infmon.journal import JournalWriter
from infmon.report import write_reports
from tests.conftest import system_tool
from tests.synthetic import SyntheticServer, write_synthetic_session

pytestmark = pytest.mark.e2e
EVIL = "<script>document.title='pwned';document.body.innerHTML='pwned'</script>"


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    chromium = system_tool("chromium")
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
    return subprocess.run([chromium, *flags, *args], capture_output=True, text=True, timeout=120)


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


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory) -> Path:
    """A report whose steps table has every column filled, with wide figures: c up to 1,024,
    TTFT in thousands of ms, speculative acceptance, the client's loop lag."""
    session = tmp_path_factory.mktemp("wide") / "session"
    write_synthetic_session(
        session,
        concurrencies=(1, 16, 256, 1024),
        step_duration_s=4.0,
        server=SyntheticServer(spec_acceptance=0.4),
        loop_lag_ms_per_stream=0.05,
    )
    write_reports(session)
    return session / "report.html"


STEPS_LAYOUT = """(() => {
  const h = [...document.querySelectorAll('h2')].find(x => x.textContent === 'Steps');
  const wrap = h.nextElementSibling, table = wrap.querySelector('table');
  const runs = [...table.querySelectorAll('td.w span')];
  return {
    viewport: document.documentElement.clientWidth,
    wrap: wrap.clientWidth,
    table: table.scrollWidth,
    right: table.getBoundingClientRect().right,
    columns: table.rows[0].cells.length,
    runs: runs.length,
    broken: runs.filter(r => r.getClientRects().length > 1).map(r => r.textContent),
  };
})()"""


async def _evaluate(devtools_port: int, url: str, width: int, height: int, js: str) -> dict:
    """Open ``url`` in a ``width`` × ``height`` window and return what ``js`` evaluates to
    (DevTools evaluates it: the page itself runs no script, its CSP forbids them)."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{devtools_port}/json/new?about:blank") as r:
            tab = json.loads(await r.text())
        async with http.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 1_000_000))

            async def call(method: str, **params: object) -> dict:
                n = next(ids)
                await ws.send_json({"id": n, "method": method, "params": params})
                while (msg := await ws.receive_json(timeout=60)).get("id") != n:
                    pass
                return msg

            await call("Page.enable")
            await call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                       deviceScaleFactor=1, mobile=False)  # fmt: skip
            await call("Page.navigate", url=url)
            while (await ws.receive_json(timeout=60)).get("method") != "Page.loadEventFired":
                pass
            got = await call("Runtime.evaluate", expression=js, returnByValue=True)
            return got["result"]["result"]["value"]


def test_the_steps_table_fits_a_1300_px_window(wide_report, tmp_path):
    """Issue 26, finding 12: at 1,300 px the steps table was cut at the right edge (18
    columns, 1,849 px wide in a 1,100 px page). Every column is now inside the window, with no
    sideways scroll; a cell wraps between its figures, never inside one."""
    from tests.e2e.conftest import free_port
    from tests.e2e.test_serve_chromium import _wait_http

    chromium = system_tool("chromium")
    port = free_port()
    chrome = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--remote-debugging-port={port}", f"--user-data-dir={tmp_path / 'profile'}",
         "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_http(f"http://127.0.0.1:{port}/json/version", 30)
        got = asyncio.run(_evaluate(port, wide_report.as_uri(), 1300, 900, STEPS_LAYOUT))
    finally:
        chrome.terminate()
        chrome.wait(20)
    assert got["columns"] == 18, got
    assert got["table"] <= got["wrap"], got  # no sideways scroll
    assert got["right"] <= got["viewport"], got  # the last column is on screen
    assert got["runs"] == 4 * (3 + 2 + 2 + 2), got  # TTFT, TPOT, ITL, E2EL figures per step
    assert got["broken"] == [], got  # no figure split over two lines
    shot = tmp_path / "report-1300.png"
    res = _chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1300,900", wide_report.as_uri()
    )
    assert res.returncode == 0 and shot.stat().st_size > 30_000, res.stderr[-2000:]
