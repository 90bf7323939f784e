"""Issue 28: a disaggregated deployment as a user runs it against ``infmon sim --pd``: load goes
to the decode pod, the prefill pod is read with ``--scrape-url``. ``infmon scrape --json`` shows
the NIXL transfers and the prompts' sources adding up across the two pods; the report carries the
external share; the monitor's server pane names each pod's role."""

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
def pd_pair():
    with running_sim("--pd", "--seed", "3") as decode:
        prefill = httpx.get(f"{decode}/sim/stats", timeout=5).json()["prefill_pod"]
        yield decode, prefill


def scrape(url: str) -> dict:
    run = subprocess.run(
        infmon_cmd("scrape", "--json", url), cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_bench_on_the_decode_pod_moves_every_prompt_over_nixl(pd_pair, tmp_path: Path):
    decode, prefill = pd_pair
    session = tmp_path / "s"
    run = subprocess.run(
        infmon_cmd(
            *("bench", decode, "--scrape-url", prefill, "--concurrency", "4"),
            *("--step-requests", "24", "--warmup", "0", "--prompt-tokens", "600"),
            *("--output-tokens", "16", "--session-dir", str(session)),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr
    d, p = scrape(decode), scrape(prefill)
    requests = sum(d["requests_finished_total"].values())
    assert requests == sum(p["requests_finished_total"].values()) >= 24
    pd = d["pd_transfer"]
    assert pd["transfers"] == requests and pd["failed_total"] == 0
    assert pd["xfer_time_mean_s"] > 0 and pd["bytes_total"] > 0
    assert p["pd_transfer"]["transfers"] == 0  # the prefill pod publishes NIXL, pulls nothing
    d_src, p_src = d["prompt_tokens_by_source_total"], p["prompt_tokens_by_source_total"]
    prompts = p["prompt_tokens_total"]
    assert d["prompt_tokens_total"] == prompts == sum(p_src.values()) == sum(d_src.values())
    assert d_src["local_compute"] == requests  # each prompt's last token, to sample the first
    pulled = d["prompt_tokens_cached_by_source_total"]["p2p"]
    assert pulled == d_src["external_kv_transfer"] > 0
    # the pulled bytes are the pulled blocks' (16 tokens each, whole blocks per request)
    per_token = pd["bytes_total"] / pulled
    assert 1.0 <= per_token / 57344 <= 1.0 + 16 * requests / pulled
    print(
        f"\nP/D: {requests} requests, {pulled:.0f} prompt tokens pulled in "
        f"{pd['bytes_total'] / 1e9:.2f} GB, mean transfer {pd['xfer_time_mean_s'] * 1e3:.2f} ms"
    )
    detail = json.loads((session / "report.json").read_text())["server_detail"]
    # the fleet's prompt tokens that came from another instance: both pods count each prompt,
    # the decode pod all but its last token as pulled (less what its own cache held)
    share = detail[0]["prompt_from_other_instances"]
    assert share is not None and 0.3 < share < 0.5, detail


def test_the_server_pane_names_the_prefill_and_the_decode_pod(pd_pair, tmp_path: Path):
    decode, prefill = pd_pair
    app, recorder = monitor_app(
        *(decode, "--scrape-url", prefill, "--session-dir", str(tmp_path)),
        *("--output-tokens", "24", "--scrape-interval", "0.3"),
    )
    seen: dict = {}

    async def drive() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("space", "right_square_bracket")

            def both_roles() -> bool:
                snap = app.last_snapshot
                rows = snap.server.rows if snap is not None else ()
                seen["rows"] = {r.name: r.role for r in rows}
                text = app.query_one(ServerPane).query_one(Body).last_text
                seen["pane"] = text.plain if text is not None else ""
                # a window in which prompts were pulled says their share (else it is quiet)
                pulled = "from other instances " in seen["pane"]
                return pulled and {r.role for r in rows} == {"prefill", "decode"}

            await wait_until(both_roles)
            await pilot.press("q")

    asyncio.run(drive())
    finish(app, recorder)
    print("\n" + seen["pane"])
    assert seen["rows"] == {endpoint_name(decode): "decode", endpoint_name(prefill): "prefill"}
    lines = seen["pane"].splitlines()
    assert any(line.startswith("endpoint") and "role" in line for line in lines), seen["pane"]
    for url, role in ((decode, "decode"), (prefill, "prefill")):
        assert any(
            line.startswith(endpoint_name(url)) and line.split()[1] == role for line in lines
        ), (url, seen["pane"])
