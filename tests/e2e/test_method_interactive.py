"""`infmon method` without ``--baseline``: it records the baseline, says what to do, waits for
Enter, asks for a label, and reruns the identical workload against the changed server (issue
20, must show 2: the interactive path; ``test_method_flow`` covers the headless one).

The simulator is restarted as ``fp8`` on the same port while the method waits."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time

import pytest

from tests.conftest import infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_method_waits_for_the_change_then_compares(tmp_path) -> None:
    port = str(_free_port())
    lines: list[str] = []
    cmd = infmon_cmd(
        "method", f"http://127.0.0.1:{port}", "--label", "baseline", "--concurrency", "1,8",
        "--step-duration", "4", "--warmup", "1", "--output-tokens", "48", "--no-quality",
    )  # fmt: skip
    with running_sim("--scenario", "baseline", "--seed", "1", "--port", port):
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while not any("change one thing on the server" in x for x in lines):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
    with running_sim("--scenario", "fp8", "--seed", "1", "--port", port):
        proc.stdin.write("\nfp8\n")
        proc.stdin.flush()
        assert proc.wait(timeout=180) == 0, "".join(lines)
    reader.join(5)
    out = "".join(lines)
    print(out)
    assert "--baseline runs/baseline" in out
    runs = tmp_path / "runs"
    assert {p.name for p in runs.iterdir() if p.is_dir()} == {"baseline", "fp8"}
    doc = json.loads((runs / "fp8" / "compare.json").read_text())
    assert any("fp8: faster than baseline" in x for x in doc["explanations"]), doc
    configs = [
        json.loads((runs / r / "report.json").read_text())["config"] for r in ("baseline", "fp8")
    ]
    assert len({(c["seed"], tuple(c["concurrency"])) for c in configs}) == 1
    assert json.loads((runs / "fp8" / "method.json").read_text())["baseline"] == "runs/baseline"
