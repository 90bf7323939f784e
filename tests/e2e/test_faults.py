"""`infmon bench` against the simulator misbehaving in every way `infmon sim --fault` knows.

For each kind: the run completes without a traceback, the failure is counted under its kind
(request records, step errors, or the metric source's failed scrapes), and the session record
accounts for every request sent (ids 0..N-1 each once; sent = succeeded + failed + cancelled).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import running_sim
from tests.e2e.faultkit import assert_no_crash, audit, run_bench

pytestmark = pytest.mark.e2e

SHORT = (
    "--concurrency",
    "4",
    "--step-duration",
    "2",
    "--read-timeout",
    "1s",
    "--metrics-interval",
    "0.5",
)

# fault, the kind its failed requests are filed under, the HTTP status they carry
REQUEST_FAULTS = [
    ("http500:0.3", "http", 500),
    ("http503:0.3", "http", 503),
    ("http429:0.2:0.3", "http", 429),
    ("reset:0.3", "reset", None),
    ("stall:3:0.3", "timeout", None),
    ("malformed-sse:0.3", "protocol", None),
]


def _bench_on(tmp_path: Path, fault: str, *extra: str) -> tuple[dict, object]:
    with running_sim("--seed", "5", "--fault", fault) as url:
        r = run_bench(url, tmp_path, *SHORT, "--json", str(tmp_path / "out.json"), *extra)
    assert_no_crash(r)
    assert r.returncode in (0, 1), r.stderr
    result = json.loads((tmp_path / "out.json").read_text())
    return result, audit(tmp_path / "session")


def _assert_steps_match_records(result: dict, a: object) -> None:
    """Failures are counted in the steps and kept out of the latency statistics."""
    step = result["steps"][0]
    assert step["completed"] > 0
    assert (
        step["completed"] + step["failed"] + step.get("cancelled", 0) + step["warmup_excluded"]
        <= a.sent
    )
    assert step["ttft_ms"]["p50"] is not None


@pytest.mark.parametrize(
    ("fault", "kind", "status"), REQUEST_FAULTS, ids=[f[0].split(":")[0] for f in REQUEST_FAULTS]
)
def test_request_faults_are_counted_by_kind(
    tmp_path: Path, fault: str, kind: str, status: int | None
) -> None:
    result, a = _bench_on(tmp_path, fault)
    assert a.kinds[kind] > 0, a.kinds
    assert set(a.kinds) <= {"ok", kind, "cancelled"}, a.kinds
    if status is not None:
        assert set(a.statuses) == {status}
    step = result["steps"][0]
    assert step["errors_by_kind"].get(kind, 0) > 0 and step["failed"] == sum(
        step["errors_by_kind"].values()
    )
    _assert_steps_match_records(result, a)
    assert result["top_errors"] and kind in result["top_errors"][0]["error"]


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("metrics-garbage:1", "parse"),
        ("metrics-truncated:1", "connect"),
        pytest.param("metrics-slow:6", "timeout", marks=pytest.mark.slow),  # a 6 s step: ~25 s
    ],
)
def test_metrics_faults_are_counted_and_the_load_is_untouched(
    tmp_path: Path, fault: str, kind: str
) -> None:
    extra = ("--step-duration", "6") if fault.startswith("metrics-slow") else ()
    result, a = _bench_on(tmp_path, fault, *extra)
    assert a.failed == 0 and a.succeeded > 0  # the load never notices the metrics page
    server = result["server"]
    assert server["failed_by_kind"].get(kind, 0) > 0, server
    assert server["outages"], server  # shown as stale/down from the first failure on
    assert any(e["kind"] == "server_down" and e["error_kind"] == kind for e in a.events)
    _assert_steps_match_records(result, a)


def test_restart_resets_counters_and_streams(tmp_path: Path) -> None:
    result, a = _bench_on(tmp_path, "restart:1.5", "--step-duration", "3", "--output-tokens", "64")
    assert (
        a.kinds["reset"] > 0 and a.succeeded > 0
    )  # in-flight streams were reset; the load went on
    assert result["server"]["restarts"] >= 1
    assert any(e["kind"] == "restart" for e in a.events)
    _assert_steps_match_records(result, a)


def test_process_exit_mid_run(tmp_path: Path) -> None:
    result, a = _bench_on(tmp_path, "exit:4", "--step-duration", "6")
    assert a.succeeded > 0 and a.kinds["connect"] > 0
    assert a.kinds["connect"] < 200  # refused requests back off instead of spinning
    outage = result["server"]["outages"][-1]
    assert (
        outage["end_s"] is None and outage["kind"] == "connect"
    )  # down until the end, and reported
    _assert_steps_match_records(result, a)
