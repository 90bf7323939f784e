"""The simulator fitted to a real vLLM (issue 30, must-show 1): bench at c=1,2,4, `infmon sim
--fit`, then the fitted server's forecast at c=8 and c=16 against a bench run at those levels:
mean TPOT, TTFT p50 and output tokens/s each within 15%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infmon.commands.simfit import base_config, read_session
from infmon.sim import fitio
from infmon.sim.forecast import forecast
from tests.real.harness import explain, infmon, rs

# unmet: the ±15% bound missed on this machine (forecast ÷ measured 0.95-1.69 at c=8/16)
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


@pytest.mark.timeout(1200)  # vLLM's start (~1-4 min here) and 5 bench steps of 15 s
def test_fit_at_1_2_4_forecasts_8_and_16(vllm: rs.Server, tmp_path: Path) -> None:
    fit_session = bench(vllm.url, tmp_path, "fit", "1,2,4")
    check_session = bench(vllm.url, tmp_path, "check", "8,16")
    profile = tmp_path / "vllm.toml"
    proc = infmon("sim", "--fit", str(fit_session), "--profile-out", str(profile), cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    print(proc.stdout)
    cost = fitio.load(profile)
    measured, server = read_session(check_session)
    base = base_config([server], _Args())
    rows, misses = [], []
    for obs in measured:
        f = forecast(base, cost, obs.shape)
        pairs = {
            "TPOT ms": (f.tpot_s, 1e3, obs.tpot_s * 1e3),
            "TTFT p50 ms": (f.ttft_p50_s, 1e3, ttft_p50(check_session, obs.concurrency)),
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


def ttft_p50(session: Path, concurrency: int) -> float:
    doc = json.loads((session / "report.json").read_text())
    step = next(s for s in doc["steps"] if s.get("concurrency") == concurrency)
    return float(step["ttft_ms"]["p50"])
