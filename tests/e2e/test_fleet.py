"""Issue 16, must show 5: ``--url A --url B`` against two simulators. Each gets half the
requests (±5%, by its own counter), the report names both, and the monitor's server pane at 160
columns shows a row per endpoint."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import httpx
import pytest

from infmon.commands.monitor import finish
from infmon.sources.fleet import endpoint_name
from infmon.ui.panes.base import Body
from infmon.ui.panes.server import ServerPane
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.monitorkit import monitor_app, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def two_sims():
    with (
        running_sim("--scenario", "baseline", "--seed", "1") as a,
        running_sim("--scenario", "baseline", "--seed", "2") as b,
    ):
        yield a, b


def served(url: str) -> float:
    """Requests the simulator says it finished (its own ``/metrics``)."""
    total = 0.0
    for line in httpx.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_bench_spreads_half_to_each_and_the_report_names_both(two_sims, tmp_path: Path):
    a, b = two_sims
    before = served(a), served(b)
    session = tmp_path / "s"
    run = subprocess.run(
        infmon_cmd(
            *("bench", a, "--url", b, "--concurrency", "8", "--step-duration", "4"),
            *("--warmup", "0.5", "--output-tokens", "24", "--session-dir", str(session)),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    got = [served(a) - before[0], served(b) - before[1]]
    total = sum(got)
    assert total > 50
    for n in got:
        assert abs(n - total / 2) <= 0.05 * total / 2, got
    target = json.loads((session / "report.json").read_text())["target"]
    assert [e["url"] for e in target["endpoints"]] == [a, b]
    sent = [e["requests"] for e in target["endpoints"]]
    for n in sent:
        assert abs(n - sum(sent) / 2) <= 0.05 * sum(sent) / 2, sent
    print(f"\nserved by each simulator: {got}; the journal's endpoints: {sent}")
    report = (session / "report.md").read_text()
    assert a in report and b in report


def test_the_server_pane_shows_a_row_per_endpoint(two_sims, tmp_path: Path):
    a, b = two_sims
    app, recorder = monitor_app(
        *(a, "--url", b, "--session-dir", str(tmp_path)),
        *("--output-tokens", "24", "--scrape-interval", "0.3"),
    )
    names = [endpoint_name(a), endpoint_name(b)]
    seen: dict[str, str] = {}

    async def drive() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("space", "right_square_bracket", "right_square_bracket")

            def both_running() -> bool:
                snap = app.last_snapshot
                rows = snap.server.rows if snap is not None else ()
                return len(rows) == 2 and all(r.running > 0 for r in rows)

            await wait_until(both_running)
            await pilot.pause(0.5)
            seen["rows"] = [r.name for r in app.last_snapshot.server.rows]
            seen["pane"] = app.query_one(ServerPane).query_one(Body).last_text.plain
            await pilot.press("q")

    asyncio.run(drive())
    finish(app, recorder)
    assert sorted(seen["rows"]) == sorted(names)
    lines = seen["pane"].splitlines()
    assert any(line.startswith("endpoint") for line in lines), seen["pane"]
    for name in names:
        assert any(line.startswith(name) for line in lines), (name, seen["pane"])
