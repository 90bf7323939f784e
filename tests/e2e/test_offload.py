"""Issue 28: ``infmon sim --scenario offload`` (0.6 GiB of GPU KV, 8 GiB of host memory) under
prompts that share long prefixes, as a user reads it: ``infmon scrape --json`` has the offload
traffic adding up to the prompt tokens that came from host memory, the report's section has the
step's loading share, the server pane says how much of the time went to loading."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest

from infmon.commands.monitor import finish
from infmon.ui.panes.base import Body
from infmon.ui.panes.server import ServerPane
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.monitorkit import monitor_app, wait_until

pytestmark = pytest.mark.e2e

BLOCK_BYTES = 16 * 57344  # Qwen2.5-7B bf16: 57,344 B of KV per token, 16-token blocks
PCIE = 25e9
SHAPE = ("--prompt-tokens", "4096", "--shared-prefix-tokens", "3584", "--prefix-groups", "64")
# The pane's view: 8 prefixes (28,672 tokens) still overflow the 0.6 GiB of GPU KV (~11k tokens),
# so each prefix is evicted to host memory and loaded back, and the first reload comes after 8
# prompts, not after the ~10-20 of 64 groups (which a loaded host took over 60 s to reach).
PANE_SHAPE = (*SHAPE[:-1], "8")


@pytest.fixture(scope="module")
def offload_sim():
    with running_sim("--scenario", "offload", "--seed", "4") as url:
        yield url


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_scrape_and_report_carry_offload_figures_that_add_up(offload_sim, tmp_path: Path):
    session = tmp_path / "s"
    run = subprocess.run(
        infmon_cmd(
            *("bench", offload_sim, "--concurrency", "16", "--step-requests", "64", *SHAPE),
            *("--output-tokens", "8", "--warmup", "0", "--session-dir", str(session)),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stderr
    page = subprocess.run(
        infmon_cmd("scrape", "--json", offload_sim), cwd=REPO, capture_output=True, text=True
    )
    d = json.loads(page.stdout)
    off, src = d["kv_offload"], d["prompt_tokens_by_source_total"]
    host = d["prompt_tokens_cached_by_source_total"]["host"]
    assert host == src["external_kv_transfer"] > 0
    assert off["load_bytes_total"] == host / 16 * BLOCK_BYTES  # whole blocks came back
    assert off["store_bytes_total"] > 0  # evicted blocks went out first
    requests = sum(d["requests_finished_total"].values())
    low = off["load_bytes_total"] / PCIE
    assert low <= off["load_time_s_total"] <= low + requests * 10e-6  # bytes / link + latency
    assert sum(src.values()) == d["prompt_tokens_total"]
    assert d["prompt_tokens_cached_total"] == src["local_cache_hit"] + host
    row = json.loads((session / "report.json").read_text())["server_detail"][0]
    assert 0 < row["kv_offload_load_fraction"] < 1 and row["kv_offload_load_bytes_per_s"] > 0
    assert row["prompt_from_other_instances"] > 0
    print(
        f"\noffload: {host:.0f} prompt tokens from host memory ({off['load_bytes_total'] / 1e9:.1f}"
        f" GB in {off['load_time_s_total']:.2f} s), {off['store_bytes_total'] / 1e9:.1f} GB "
        f"stored; step: {row['kv_offload_load_fraction']:.1%} of the time loading"
    )


def test_the_server_pane_says_the_loading_share(offload_sim, tmp_path: Path):
    app, recorder = monitor_app(
        *(offload_sim, "--session-dir", str(tmp_path), *PANE_SHAPE),
        *("--output-tokens", "8", "--scrape-interval", "0.5"),
    )
    seen: dict = {}

    async def drive() -> None:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("space", *["right_square_bracket"] * 4)

            def loading() -> bool:  # on screen, both in one window's figures
                seen["pane"] = app.query_one(ServerPane).query_one(Body).last_text.plain
                return "KV offload loading " in seen["pane"] and "from host memory " in seen["pane"]

            await wait_until(loading, 60.0)
            await pilot.press("q")

    asyncio.run(drive())
    finish(app, recorder)
    print("\n" + seen["pane"])
    assert "KV offload loading " in seen["pane"] and " of the time" in seen["pane"]
    assert "loading 0.0% of" not in seen["pane"]
    assert "from host memory " in seen["pane"]  # the external KV came from the offload tier
