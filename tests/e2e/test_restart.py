"""Kill the simulator during `infmon bench` and start it again: measurement goes on, the outage is
recorded with its times, the counters' reset is noted as a server restart, and the report shows it."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.faultkit import assert_no_crash, audit, free_port, start_bench, start_sim, stop_proc

pytestmark = pytest.mark.e2e


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_bench_survives_a_killed_and_restarted_server(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sim = start_sim(port)
    try:
        bench = start_bench(
            url,
            tmp_path,
            "--concurrency",
            "4",
            "--step-duration",
            "9",
            "--output-tokens",
            "48",
            "--metrics-interval",
            "0.5",
            "--json",
            str(tmp_path / "out.json"),
        )
        time.sleep(2.5)
        sim.send_signal(signal.SIGKILL)  # a crash: no goodbye on any connection
        sim.wait()
        time.sleep(2.0)
        sim = start_sim(port)
        out, err = bench.communicate(timeout=60)
    finally:
        stop_proc(sim)
    assert_no_crash((out, err))
    assert bench.returncode == 1, err  # some requests failed, and the run says so
    a = audit(tmp_path / "session")
    assert a.kinds["connect"] > 0 and a.kinds["connect"] < 150  # refused while down, backing off
    assert a.kinds["reset"] + a.kinds["timeout"] > 0  # the streams in flight at the kill
    from infmon.journal import SessionReader

    records = list(SessionReader(tmp_path / "session").iter_records())
    last_refused = max(r.end_s for r in records if r.error_kind == "connect")
    assert sum(1 for r in records if r.ok and r.sent_s > last_refused) >= 8  # measuring again
    result = json.loads((tmp_path / "out.json").read_text())
    server = result["server"]
    outage = server["outages"][0]
    assert 1.0 < outage["duration_s"] < 8.0 and outage["end_s"] is not None
    assert server["restarts"] >= 1  # the new process's counters started from zero
    kinds = [e["kind"] for e in a.events]
    assert kinds.index("server_down") < kinds.index("server_up") < kinds.index("restart")
    assert "server metrics unreachable for" in out
    report = (tmp_path / "session" / "report.md").read_text()
    assert "## Faults" in report and "server restarted" in report and "server back after" in report
