"""Issue 16, must show 4: a real Prometheus scrapes a running ``infmon bench --metrics-port``,
and ``histogram_quantile(0.5, rate(infmon_ttft_seconds_bucket[…]))`` is the report's TTFT p50
within one bucket (the exporter's buckets are vLLM's)."""

from __future__ import annotations

import bisect
import json
import math
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from infmon.exporter import TTFT_BUCKETS
from tests.conftest import REPO, infmon_cmd, poll_until, running_sim
from tests.e2e.conftest import free_port, prometheus_for

pytestmark = [pytest.mark.e2e, pytest.mark.prometheus]


def query(prom: str, expr: str, at: float) -> list[dict]:
    r = httpx.get(f"{prom}/api/v1/query", params={"query": expr, "time": at}, timeout=5)
    r.raise_for_status()
    return r.json()["data"]["result"]


def dashboard_exprs() -> list[str]:
    """The Grafana dashboard's queries, its variables set as Grafana would."""
    d = json.loads((REPO / "docs" / "grafana-infmon.json").read_text())
    subst = {"$__rate_interval": "5s", "$__range": "5m", "$infmon_job": ".*", "$vllm_job": ".*"}
    out = []
    for p in d["panels"]:
        for t in p.get("targets", []):
            expr = t["expr"]
            for k, v in subst.items():
                expr = expr.replace(k, v)
            out.append(expr)
    return out


def ok_at(prom: str, at: float) -> float | None:
    got = query(prom, 'infmon_requests_total{outcome="ok"}', at)
    return float(got[0]["value"][1]) if got else None


def load_totals(session: Path) -> dict[str, int]:
    with closing(sqlite3.connect(session / "journal.sqlite")) as db:
        rows = db.execute("SELECT event FROM events WHERE kind = 'load_totals'").fetchall()
    (row,) = rows
    return json.loads(row[0])


def bucket_of(seconds: float) -> int:
    """Index of the ``le`` bucket that holds ``seconds``."""
    return bisect.bisect_left(TTFT_BUCKETS, seconds)


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_prometheus_scrapes_bench_and_its_ttft_p50_is_the_reports(tmp_path: Path) -> None:
    port = free_port()
    session = tmp_path / "s"
    with running_sim("--scenario", "baseline", "--seed", "4") as sim:
        bench = subprocess.Popen(
            infmon_cmd(
                *("bench", sim, "--concurrency", "6", "--step-duration", "12", "--warmup", "0"),
                *("--output-tokens", "32", "--metrics-port", f"127.0.0.1:{port}"),
                *("--session-dir", str(session)),
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with prometheus_for(f"http://127.0.0.1:{port}", series="infmon_.+") as prom:
                t_first = time.time()
                _, err = bench.communicate(timeout=120)
                t_end = time.time()
                assert bench.returncode == 0, err
                # bench held its final figures until Prometheus scraped them: every request
                # it made is in Prometheus at its exit (once ingested), none lost in between
                at, succeeded = t_end, load_totals(session)["succeeded"]
                poll_until(lambda: ok_at(prom, at) == succeeded, 10, f"{succeeded} ok requests")
                window = f"{math.ceil(t_end - t_first) + 10}s"
                expr = (
                    "histogram_quantile(0.5, sum by (le) "
                    f"(rate(infmon_ttft_seconds_bucket[{window}])))"
                )
                (got,) = query(prom, expr, at)
                ok = query(prom, 'infmon_requests_total{outcome="ok"}', at)
                workers = query(prom, "infmon_workers", at)
                shown = {}
                for expr in dashboard_exprs():  # the Grafana dashboard's PromQL parses
                    shown[expr] = query(prom, expr, at)
        finally:
            if bench.poll() is None:
                bench.kill()
                bench.wait()
    prom_p50 = float(got["value"][1])
    step = json.loads((session / "report.json").read_text())["steps"][0]
    report_p50 = step["ttft_ms"]["p50"] / 1e3
    print(f"\nTTFT p50: Prometheus {prom_p50 * 1e3:.1f} ms, the report {report_p50 * 1e3:.1f} ms")
    assert abs(bucket_of(prom_p50) - bucket_of(report_p50)) <= 1, (prom_p50, report_p50)
    assert float(workers[0]["value"][1]) == 1
    ttft_panel = next(e for e in shown if "infmon_ttft" in e and "0.5," in e)
    assert shown[ttft_panel], "the dashboard's client TTFT panel has data"
    assert float(ok[0]["value"][1]) == succeeded >= step["completed"]
