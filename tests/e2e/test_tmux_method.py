"""`infmon method` end to end in tmux, as an operator runs it (issue 20, must show 2).

In one terminal: `infmon method URL --label baseline` records the baseline sweep and quality
probes, says what to do and waits; the simulator is restarted as ``fp8`` on the same port, the
operator presses Enter and types the label; the method reruns the baseline's workload and
compares. Then the simulator becomes ``spec-pitfall`` and the operator runs the method again
against ``runs/baseline``. Three sessions; ``runs/compare.json`` names FP8's speed-up with its
quality cost and spec-pitfall's regression with its cause, from the recorded data."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
LOAD = ("--concurrency", "1,16", "--step-duration", "4", "--warmup", "1", "--output-tokens", "64")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _line(*args: str) -> str:
    env = f"PYTHONPATH={shlex.quote(str(REPO))}"
    return f"{env} {shlex.join(infmon_cmd(*args))}"


def test_the_method_in_a_terminal_baseline_fp8_then_spec_pitfall(tmp_path: Path) -> None:
    port = str(_free_port())
    url = f"http://127.0.0.1:{port}"
    t = Tmux(f"infmon-method-{os.getpid()}", "method")
    t.run(
        "new-session", "-d", "-s", "method", "-x", "160", "-y", "48", "-c", str(tmp_path),
        "env -u COLUMNS -u LINES TERM=xterm-256color bash --norc --noprofile",
    )  # fmt: skip
    try:
        with running_sim("--scenario", "baseline", "--seed", "1", "--port", port):
            t.keys(_line("method", url, "--label", "baseline", *LOAD) + "; echo first=$?", "Enter")
            t.wait_for(
                "the method to wait for the change",
                lambda s: "change one thing on the server" in s,
                240,
            )
        with running_sim("--scenario", "fp8", "--seed", "1", "--port", port):
            t.keys("Enter")
            t.wait_for("the label prompt", lambda s: "label for the changed run" in s, 30)
            t.keys("fp8", "Enter")
            first = t.wait_for("the fp8 run", lambda s: re.search(r"first=\d", s), 300)
        with running_sim("--scenario", "spec-pitfall", "--seed", "1", "--port", port):
            again = _line(
                "method", url, "--headless", "--label", "spec-pitfall", "--baseline",
                "runs/baseline",
            )  # fmt: skip
            t.keys("clear; " + again + "; echo second=$?", "Enter")
            second = t.wait_for("the spec-pitfall run", lambda s: re.search(r"second=\d", s), 300)
    finally:
        t.run("kill-server", check=False)
    print(first, second, sep="\n")
    assert "first=0" in first, first
    assert "second=0" in second or "second=1" in second, second
    runs = tmp_path / "runs"
    assert {p.name for p in runs.iterdir() if p.is_dir()} == {"baseline", "fp8", "spec-pitfall"}
    configs = [json.loads((runs / r / "report.json").read_text())["config"] for r in ("fp8",)]
    base = json.loads((runs / "baseline" / "report.json").read_text())["config"]
    assert all(c["seed"] == base["seed"] for c in configs)  # the same workload, repeated
    doc = json.loads((runs / "compare.json").read_text())
    lines = doc["explanations"]
    print("\n".join(lines))
    fp8 = [x for x in lines if x.startswith("fp8:")]
    spec = [x for x in lines if x.startswith("spec-pitfall:")]
    assert any("faster than baseline" in x and "quality cost" in x for x in fp8), lines
    assert any("spec decoding: acceptance" in x and "drafter passes" in x for x in spec), lines
    # the figures are the sessions' own: c=1 tok/s of the baseline equals its report's step
    steps = json.loads((runs / "baseline" / "report.json").read_text())["steps"]
    c1 = next(s for s in steps if s["concurrency"] == 1)
    row = next(s for s in doc["steps"] if s["level"] == "c=1")["runs"][0]
    assert row["tok_s"]["value"] == pytest.approx(c1["output_throughput_tok_s"], rel=1e-6)
