"""A server whose pace wanders between rounds (the simulator's ``wander`` fault: full speed,
then every step twice as long, by turns, as this project's VM ran by turns at two speeds):
``bench --repeat`` ends by saying the rounds wandered and whose the wander was. With vLLM's
per-request timings (``--enable-per-request-metrics``) the server's own TPOT moved with the
client's, so it names the server's pace (a client on a loaded host, as in CI beside a second
test, may read a round a few percent off the server's own: it says so and still names the
server's pace); without them it says it cannot tell."""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
LOAD = ("--concurrency", "1", "--step-duration", "3", "--warmup", "1", "--output-tokens", "32",
        "--repeat", "5")  # fmt: skip
"""Steps of ~4 s against turns of 6 s: rounds at full speed, slow, and across a turn."""


@pytest.mark.timeout(300)
def test_bench_of_rounds_names_the_servers_wandering_pace(tmp_path):
    with running_sim("--scenario", "baseline", "--enable-per-request-metrics",
                     "--fault", "wander:6") as timed, \
            running_sim("--scenario", "baseline", "--fault", "wander:6") as bare:  # fmt: skip
        b = subprocess.Popen(
            infmon_cmd("bench", bare, *LOAD, "--session-dir", str(tmp_path / "bare")),
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        out = subprocess.run(
            infmon_cmd("bench", timed, *LOAD, "--session-dir", str(tmp_path / "timed")),
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        b_out, _ = b.communicate(timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert b.returncode == 0, b_out
    said = " ".join(out.stdout.split())  # wrapped to the table's 100 columns
    assert "warning: rounds of one level wandered" in said, out.stdout
    assert "worst c=1" in said, out.stdout
    # the server's pace, with or without a few percent of a loaded client host's reading
    assert "the server's pace moved" in said and "cannot tell" not in said, out.stdout
    assert "A comparison of these rounds carries that much noise" in said, out.stdout
    bare_said = " ".join(b_out.split())
    assert "warning: rounds of one level wandered" in bare_said, b_out
    assert "cannot tell the server's pace from this client's reading" in bare_said, b_out
