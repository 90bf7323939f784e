"""The simulator fitted to a real vLLM (issue 30, must-show 1): bench at c=1,2,4, `infmon sim
--fit`, then the fitted server's forecast at c=8 and c=16 against a bench run at those levels:
mean TPOT, TTFT p50 and output tokens/s each within 15%.

Each bench runs its levels in three rounds (``--repeat 3``): on this 2-core host one 15 s step
of the same level varies by up to ±15% in tokens/s from round to round (vLLM's CPU processes
spin on both cores and the host's scheduler decides who runs), so one step is not a figure to
hold a forecast to within 15%. The fit takes every round; the check is the rounds' mean.

The vLLM runs with ``--enable-per-request-metrics``, so ``--fit``'s default targets are both the
client's streams and the server's own timings: the engine's steps are pinned by the server's
figures, and the client's TTFT adds the API server's time (``request_s``, and its event loop's
wait for every other stream open, ``frontend_stream_s``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from infmon.commands.simfit import base_config, read_session
from infmon.sim import fitio
from infmon.sim.forecast import forecast
from tests.real.harness import explain, infmon, rs

# unmet: the ±15% bound missed on this machine (forecast ÷ the rounds' mean at c=8 / 16; 2 Dec:
# TPOT 0.87 / 0.79, TTFT p50 1.16 / 1.05, tok/s 1.10 / 1.21; 3 Dec: 0.71 / 0.54, 0.97 / 0.70,
# 1.35 / 1.78; with the serial API server: 0.90 / 0.84, 1.06 / 0.76, 1.03 / 1.14): a level's
# rounds drift by ±15% and more here, and at c ≤ 4 the cost per running sequence is under
# that drift: README
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
        "--repeat",
        "3",
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


@pytest.mark.timeout(1500)  # vLLM's start (~1-4 min here) and 3 rounds of 5 bench steps of 15 s
def test_fit_at_1_2_4_forecasts_8_and_16(vllm_timed: rs.Server, tmp_path: Path) -> None:
    fit_session = bench(vllm_timed.url, tmp_path, "fit", "1,2,4")
    check_session = bench(vllm_timed.url, tmp_path, "check", "8,16")
    profile = tmp_path / "vllm.toml"
    proc = infmon(
        "sim", "--fit", str(fit_session), "--profile-out", str(profile), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, explain(proc)
    print(proc.stdout)
    cost = fitio.load(profile)
    assert cost.targets == "both"
    measured, server = read_session(check_session)
    base = base_config([server], _Args())  # type: ignore[arg-type]
    rows, misses = [], []
    for c in sorted({o.concurrency for o in measured}):
        rounds = [o for o in measured if o.concurrency == c]
        f = forecast(base, cost, rounds[0].shape)
        pairs = {
            "TPOT ms": (f.tpot_s, 1e3, [o.tpot_s * 1e3 for o in rounds]),
            "TTFT p50 ms": (f.ttft_p50_s, 1e3, [o.ttft_p50_s * 1e3 for o in rounds]),
            "output tok/s": (f.output_tok_s, 1.0, [o.output_tok_s for o in rounds]),
            "server TTFT ms (queue → first token)": (
                f.queue_ttft_mean_s,
                1e3,
                [o.server_ttft_s * 1e3 for o in rounds],
            ),
        }
        for name, (band, scale, each) in pairs.items():
            meas = statistics.fmean(each)
            ratio = band.value * scale / meas
            inside = abs(band.value * scale - meas) <= band.half_width * scale
            rows.append(
                f"c={c} {name}: forecast {band.text(scale)} measured {meas:.2f} (rounds "
                f"{', '.join(f'{x:.2f}' for x in each)}) ratio {ratio:.2f}"
                f"{'' if inside else ' (outside the band)'}"
            )
            if abs(ratio - 1) > TOLERANCE and not name.startswith("server"):
                misses.append(rows[-1])
    print("\n".join(rows))
    assert sorted({o.concurrency for o in measured}) == [8, 16]
    assert not misses, "\n".join(misses)
