"""A fleet found and read through a real Prometheus: ``--urls-from-prometheus SELECTOR`` loads
every target of ``up{SELECTOR}``, and the Prometheus source gives each pod its own rates (the
per-pod generation tokens/s it used to leave empty)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from infmon.sources.promql import PrometheusSource
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.conftest import JOB, prometheus_for, wait_for_scrape_after

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_urls_from_prometheus_load_both_and_each_pod_has_its_rates(tmp_path: Path) -> None:
    session = tmp_path / "s"
    with (
        running_sim("--scenario", "baseline", "--seed", "5") as a,
        running_sim("--scenario", "baseline", "--seed", "6") as b,
        prometheus_for(a, more_targets=(b,)) as prom,
    ):
        run = subprocess.run(
            infmon_cmd(
                *("bench", "--urls-from-prometheus", f'job="{JOB}"', "--prometheus", prom),
                *("--concurrency", "6", "--step-duration", "5", "--warmup", "0.5"),
                *("--output-tokens", "32", "--session-dir", str(session)),
            ),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        wait_for_scrape_after(prom, time.time(), f'up{{job="{JOB}"}}')  # each simulator's
        source = PrometheusSource(prom, f'job="{JOB}"', window_s=30.0)
        snap = source.snapshot_sync(time.monotonic())
    target = json.loads((session / "report.json").read_text())["target"]
    assert sorted(e["url"] for e in target["endpoints"]) == sorted([a, b])
    sent = [e["requests"] for e in target["endpoints"]]
    assert min(sent) >= 0.45 * sum(sent) and sum(sent) > 20, sent
    rows = {dict(e.labels)["instance"]: e for e in snap.engines}
    assert sorted(rows) == sorted(u.removeprefix("http://") for u in (a, b))
    for e in rows.values():
        assert e.generation_tokens_per_s is not None and e.generation_tokens_per_s > 0
    total = sum(e.generation_tokens_per_s for e in rows.values())
    assert total == pytest.approx(snap.generation_tokens_per_s, rel=0.05)
