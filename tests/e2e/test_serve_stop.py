"""`infmon serve demo` stopped right after its page closed still writes the page's report
(issue 26, must show 2: the browser demo's report).

The page closes (its WebSocket ends): textual-serve tells the page's monitor to quit, and the
monitor closes its journal and writes its report. The operator then stops `infmon serve` (SIGTERM
to its process group, or Ctrl+C: SIGINT), which reaches the monitor too while the report is
written. The monitor's event loop had handed these signals back to their fatal defaults, so the
report was never written; now the monitor says it is finishing the report and does. The page's
close itself is a quit like `q` (the load stopped, its totals journalled), not Textual's bare exit
(which left the load running and the quit's reason "error").
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, poll_until
from tests.e2e.conftest import free_port
from tests.e2e.test_serve_chromium import _printed_url

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def journal_kinds(session: Path) -> set[str]:
    db = session / "journal.sqlite"
    if not db.exists():
        return set()
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as c:
            return {k for (k,) in c.execute("select distinct kind from events")}
    except sqlite3.Error:
        return set()


def quit_reason(session: Path) -> str | None:
    with sqlite3.connect(f"file:{session / 'journal.sqlite'}?mode=ro", uri=True) as c:
        row = c.execute("select event from events where kind = 'quit'").fetchone()
    return json.loads(row[0]).get("reason") if row else None


def steps_ended(session: Path) -> int:
    db = session / "journal.sqlite"
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as c:
            (n,) = c.execute("select count(*) from events where kind = 'step_end'").fetchone()
    except sqlite3.Error:
        return 0
    return int(n)


async def hold_page(page: str, session: Path, serve: subprocess.Popen, then=None) -> None:
    """Open the page's WebSocket (as the browser does) and read it until the demo has begun its
    second step; then close it (the tab closed), or keep it open while ``then()`` runs."""
    import aiohttp

    base, token = page.split("/?token=")
    ws_url = base.replace("http://", "ws://") + f"/ws/{token}?width=120&height=40"
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(ws_url, headers={"Origin": base}) as ws,
    ):

        async def drain() -> None:
            async for _ in ws:
                pass

        reader = asyncio.create_task(drain())
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(
            None,
            lambda: poll_until(
                lambda: steps_ended(session) >= 1, 90, "the demo's second step", serve
            ),
        )
        if then is None:
            await ws.close()
        else:
            await loop.run_in_executor(None, then)
        reader.cancel()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stopping_serve_as_its_page_closes_still_writes_the_report(tmp_path, stop) -> None:
    pytest.importorskip("textual_serve", reason="infmon serve needs textual-serve")
    session = tmp_path / "session"
    port = free_port()
    banner = tmp_path / "serve.log"
    argv = ["serve", "--listen", f"127.0.0.1:{port}", "demo", "--session-dir", str(session)]
    serve = subprocess.Popen(
        [sys.executable, "-m", "infmon", *argv], cwd=REPO, stdout=banner.open("wb"),
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        asyncio.run(hold_page(_printed_url(banner, 30), session, serve))
        # the page's monitor quits and starts its report; serve is stopped meanwhile
        poll_until(lambda: "quit" in journal_kinds(session), 30, "the monitor's quit", serve)
        os.killpg(serve.pid, stop)
        serve.wait(60)
        report = poll_until(
            lambda: (session / "report.json").exists() and session / "report.json", 30,
            "the page's report",
        )  # fmt: skip
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
    # the page's close was a quit like `q`: the load stopped (its totals journalled) first
    assert {"load_totals", "quit"} <= journal_kinds(session)
    assert quit_reason(session) == "page closed"
    doc = json.loads(report.read_text())
    assert doc["steps"] and doc["steps"][0]["level"] == "c=1", doc["steps"]
    assert (session / "report.html").exists() and (session / "report.md").exists()


def test_stopping_serve_alone_with_a_page_open_writes_the_pages_report(tmp_path) -> None:
    """SIGTERM to `infmon serve` only (a service manager's stop): it stops each page's monitor
    and waits while it writes its report, then exits."""
    pytest.importorskip("textual_serve", reason="infmon serve needs textual-serve")
    session = tmp_path / "session"
    banner = tmp_path / "serve.log"
    argv = ["serve", "--listen", f"127.0.0.1:{free_port()}", "demo", "--session-dir", str(session)]
    serve = subprocess.Popen(
        [sys.executable, "-m", "infmon", *argv], cwd=REPO, stdout=banner.open("wb"),
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip

    def stop_serve_alone() -> None:
        os.kill(serve.pid, signal.SIGTERM)
        serve.wait(90)

    try:
        asyncio.run(hold_page(_printed_url(banner, 30), session, serve, stop_serve_alone))
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
    assert serve.returncode == 0, banner.read_text()
    assert (session / "report.json").exists(), banner.read_text()  # written before serve left
    assert quit_reason(session) == "SIGTERM"
    log = banner.read_text()
    assert "stopping: 1 page(s) writing their reports" in log and "Traceback" not in log, log
