"""The simulator fitted to a real vLLM (issue 30, must-show 1): bench at c=1,2,4, `infmon sim
--fit`, then the fitted server's forecast at c=8 and c=16 against a bench run at those levels:
mean TPOT, TTFT p50 and output tokens/s each within 15%.

The vLLM runs with ``--enable-per-request-metrics``, so both sessions carry the server's own
per-request timings (its engine clock), and ``--fit`` fits TTFT and TPOT to those, and the check
reads them: on this 2-core host vLLM's CPU engine starves the client, whose streams run late
(issue 25: the client's TPOT 0.4-0.9 of the server's), which no cost model of the server should
chase. Output tokens/s (tokens over the step) is the client's. The client's own figures are
printed beside, for the record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infmon.commands.simfit import base_config, read_session
from infmon.sim import fitio
from infmon.sim.forecast import forecast
from tests.real.harness import explain, infmon, rs

# unmet: the ±15% bound missed on this machine (server's figures: forecast ÷ measured TPOT 1.84 /
# 1.55, TTFT p50 1.31 / 0.88, tok/s 3.20 / 2.16 at c=8 / 16): the closed loop's pace here is set
# by vLLM's API process and the client starving beside its CPU engine, not by the engine's steps
pytestmark = [pytest.mark.real_server, pytest.mark.unmet]

LOAD = ("--prompt-tokens", "32", "--output-tokens", "32", "--endpoint", "completions")
TOLERANCE = 0.15


def bench(url: str, tmp: Path, name: str, levels: str) -> Path:
    session = tmp / name
    proc = infmon(
        "bench",
        url,
        *LOAD,
        "--ignore-eos",
        "--concurrency",
        levels,
        "--step-duration",
        "15s",
        "--session-dir",
        str(session),
        cwd=tmp,
    )
    assert proc.returncode == 0, explain(proc)
    return session


class _Args:
    max_num_seqs = None
    max_num_batched_tokens = None


@pytest.fixture(scope="module")
def vllm_timed(real_setup, server_logs: Path) -> Iterator[rs.Server]:
    """vLLM that puts its own per-request timings in each stream's usage chunk."""
    with rs.serve_vllm(server_logs, per_request=True) as server:
        yield server


@pytest.mark.timeout(1200)  # vLLM's start (~1-4 min here) and 5 bench steps of 15 s
def test_fit_at_1_2_4_forecasts_8_and_16(vllm_timed: rs.Server, tmp_path: Path) -> None:
    fit_session = bench(vllm_timed.url, tmp_path, "fit", "1,2,4")
    check_session = bench(vllm_timed.url, tmp_path, "check", "8,16")
    profile = tmp_path / "vllm.toml"
    proc = infmon(
        "sim", "--fit", str(fit_session), "--targets", "server", "--profile-out", str(profile),
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    print(proc.stdout)
    cost = fitio.load(profile)
    assert cost.targets == "server"
    measured, server = read_session(check_session, "server")
    client = {o.concurrency: o for o in read_session(check_session, "client")[0]}
    base = base_config([server], _Args())  # type: ignore[arg-type]
    rows, misses = [], []
    for obs in measured:
        f = forecast(base, cost, obs.shape)
        seen = client[obs.concurrency]
        rows.append(
            f"c={obs.concurrency} the client's own: TPOT {seen.tpot_s * 1e3:.2f} ms, "
            f"TTFT p50 {seen.ttft_p50_s * 1e3:.2f} ms (the server's: "
            f"{obs.tpot_s * 1e3:.2f}, {obs.ttft_p50_s * 1e3:.2f})"
        )
        pairs = {
            "TPOT ms": (f.tpot_s, 1e3, obs.tpot_s * 1e3),
            "TTFT p50 ms": (f.queue_ttft_p50_s, 1e3, obs.ttft_p50_s * 1e3),
            "output tok/s": (f.output_tok_s, 1.0, obs.output_tok_s),
        }
        for name, (band, scale, meas) in pairs.items():
            ratio = band.value * scale / meas
            inside = abs(band.value * scale - meas) <= band.half_width * scale
            rows.append(
                f"c={obs.concurrency} {name}: forecast {band.text(scale)} measured {meas:.2f} "
                f"ratio {ratio:.2f}{'' if inside else ' (outside the band)'}"
            )
            if abs(ratio - 1) > TOLERANCE:
                misses.append(rows[-1])
    print("\n".join(rows))
    assert sorted(o.concurrency for o in measured) == [8, 16]
    assert not misses, "\n".join(misses)
