"""The real monitor wiring (driver, poller, journal, reports) in Pilot against a scripted server.

The scripted server has no /metrics, so this also shows the client-only view: the Session notes
that the server publishes no metrics and the load still runs and is recorded.
"""

from __future__ import annotations

import asyncio

import pytest
from textual.widgets import Input

from infmon.cli import build_parser
from infmon.commands.load_args import config_from_args
from infmon.commands.monitor import build_monitor, finish
from infmon.journal import SessionReader
from tests.loadkit.server import Behaviour, serve

pytestmark = pytest.mark.e2e


async def wait_until(predicate, timeout_s: float = 20.0) -> None:
    for _ in range(int(timeout_s / 0.1)):
        if predicate():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


def test_monitor_drives_records_and_reports(tmp_path):
    with serve(Behaviour(ttft_s=0.01, itl_s=0.002)) as url:
        args = build_parser().parse_args(
            [
                "monitor",
                url,
                "--session-dir",
                str(tmp_path),
                "--output-tokens",
                "16",
                "--scrape-interval",
                "0.2",
                "--step-duration",
                "5s",
            ]
        )
        app, recorder = build_monitor(config_from_args(args), args)
        app.handle_signals = False

        async def drive() -> None:
            async with app.run_test(size=(120, 40)) as pilot:
                await pilot.press("space", "right_square_bracket")
                await wait_until(
                    lambda: (
                        app.last_snapshot is not None and app.last_snapshot.latency.ttft.count > 5
                    )
                )
                assert app.last_snapshot.header.model == "fake-model"
                assert app.controller.dial.state.concurrency == 2
                await pilot.press("m")
                app.screen.query_one(Input).value = "note"  # typing waits on the cursor blink
                await pilot.press("enter", "s")
                await wait_until(lambda: bool(app.reports_written))
                await pilot.press("q")

        asyncio.run(drive())
        out = finish(app, recorder)
    assert out.endswith("report.md")
    assert (tmp_path / "screenshot.svg").read_text().startswith("<svg")
    reader = SessionReader(tmp_path)
    events = list(reader.iter_events())
    kinds = [e["kind"] for e in events]
    for kind in (
        "target",
        "step_begin",
        "step_end",
        "resume",
        "concurrency",
        "mark",
        "quit",
        "session_end",
    ):
        assert kind in kinds, kind
    assert next(e for e in events if e["kind"] == "mark")["note"] == "note"
    assert reader.record_count() > 5
    assert app.exit_reason == "quit"
    assert any("no /metrics" in e.text for e in app.session.snapshot(1e9).events)
