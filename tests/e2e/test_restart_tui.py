"""The live monitor (Pilot, real simulator subprocess) while the server is killed and started again.

The outage shows on screen (DOWN since …) and in the record; load and scraping resume by
themselves; the counter reset is noted as a restart; the final report, its screenshot included,
holds neither the API key nor interpreted markup from the server's model name.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infmon.config import build_config
from infmon.journal import SessionReader
from tests.e2e.faultkit import KEY, free_port, start_sim, stop_proc

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
]  # a server killed and restarted under the TUI: ~14 s
HOSTILE = "<script>x</script>[bold red]model[/]"


async def _until(cond: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


def _screen_text(app) -> str:
    return html.unescape(app.export_screenshot()).replace("\xa0", " ")


async def test_tui_keeps_monitoring_through_a_server_restart(tmp_path: Path) -> None:
    from infmon.commands.monitor import build_monitor, finish

    port = free_port()
    sim_args = ("--served-model-name", HOSTILE)
    sim = start_sim(port, *sim_args)
    session_dir = tmp_path / "session"
    config = build_config(
        {
            "url": f"http://127.0.0.1:{port}",
            "api_key": KEY,
            "concurrency": "4",
            "output_tokens": "32",
            "step_duration": "5",
            "session_dir": str(session_dir),
        },
        environ={"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
    )
    args = argparse.Namespace(metrics_url=None, scrape_interval=0.5, theme="infmon-dark", ui_hz=4.0)
    app, recorder = build_monitor(config, args)
    app.handle_signals = False
    session = app.session
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await _until(lambda: session.succeeded >= 8, "requests before the kill")
            up_screen = _screen_text(app)
            sim.send_signal(signal.SIGKILL)
            sim.wait()
            await _until(
                lambda: app.last_snapshot is not None and not app.last_snapshot.server.up, "down"
            )
            await pilot.pause()
            down_screen = _screen_text(app)
            failed_while_down = session.failed
            sim = start_sim(port, *sim_args)
            ok_before = session.succeeded
            await _until(
                lambda: app.last_snapshot.server.up and session.succeeded >= ok_before + 8,
                "recovery",
            )
            await pilot.press("q")
    finally:
        stop_proc(sim)
    report = Path(finish(app, recorder))
    assert "server down" in down_screen and "DOWN since" in down_screen
    assert "[bold red]model[/]" in up_screen  # the server's text shown as text, not as markup
    totals = app.controller.engine.totals
    assert failed_while_down > 0
    assert totals.sent == totals.succeeded + totals.failed + totals.cancelled > 0
    kinds = [e["kind"] for e in SessionReader(session_dir).iter_events()]
    assert kinds.index("server_down") < kinds.index("server_up")
    assert "restart" in kinds
    md = report.read_text()
    assert "## Faults" in md and "server back" in md and "server restarted" in md
    produced = [p for p in session_dir.iterdir() if p.is_file()]
    assert {"screenshot.svg", "report.html", "report.md", "requests.csv", "journal.sqlite"} <= {
        p.name for p in produced
    }
    assert [p.name for p in produced if KEY.encode() in p.read_bytes()] == []
    page = (session_dir / "report.html").read_text()
    assert "<script>x" not in page
