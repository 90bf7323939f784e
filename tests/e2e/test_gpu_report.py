"""`infmon bench --gpu-metrics` against the simulator: the journal keeps each scrape's GPUs and
the reports (JSON, Markdown, HTML) show them per step, with the contention named on each step
of the `contention` scenario and on none of `baseline` (issue 22)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim

pytestmark = pytest.mark.e2e


def bench(url: str, session: Path) -> tuple[dict, str]:
    r = subprocess.run(
        infmon_cmd(
            "bench",
            url,
            "--gpu-metrics",
            f"{url}/gpu-metrics",
            "--concurrency",
            "1,16",
            "--step-duration",
            "4",
            "--warmup",
            "0.5",
            "--output-tokens",
            "64",
            "--session-dir",
            str(session),
        ),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    return json.loads((session / "report.json").read_text()), r.stdout


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_contention_named_per_step_in_every_report(tmp_path: Path) -> None:
    with running_sim("--scenario", "contention", "--seed", "5") as url:
        doc, _ = bench(url, tmp_path / "s")
    steps = doc["steps"]
    assert [s["concurrency"] for s in steps] == [1, 16]
    for s in steps:
        (g,) = s["gpu"]
        assert g["serving"] and g["label"] == "GPU 0" and g["scrapes"] >= 2
        assert g["activity_mean"] > 0.5 and g["power_limit_w"] == 300.0
        assert [h["name"] for h in g["others"]] == ["noisy-neighbour-0"]
        assert g["others"][0]["mem_gib_max"] == 3.1  # NEIGHBOUR_MIB, 3174 MiB
    named = [x for x in doc["diagnosis"] if "GPU contention" in x]
    assert [x.split(":")[0] for x in named] == ["c=1", "c=16"]
    assert all("noisy-neighbour-0: 3.1 GiB, SM 3" in x for x in named)
    md = (tmp_path / "s" / "report.md").read_text()
    assert "## GPU" in md and "noisy-neighbour-0 (3.1 GiB" in md
    html = (tmp_path / "s" / "report.html").read_text()
    assert "<h2>GPU</h2>" in html and "GPU activity over time" in html


@pytest.mark.slow  # over ~15 s on 2 cores: out of the fast suite, run by CI's slow tier
def test_baseline_names_no_contention_and_gives_energy_per_step(tmp_path: Path) -> None:
    with running_sim("--scenario", "baseline", "--seed", "5") as url:
        doc, out = bench(url, tmp_path / "s")
    assert all(s["gpu"] and s["gpu"][0]["others"] == [] for s in doc["steps"])
    assert not [x for x in doc["diagnosis"] if "GPU" in x]
    # issue 29's efficiency: the serving GPU's mean power over each step against its output
    # tok/s, as tok/s per watt and joules per output token, in every report
    for s in doc["steps"]:
        e, (g,) = s["efficiency"], s["gpu"]
        assert e["gpus"] == 1 and e["power_w"] == pytest.approx(g["power_w_mean"], abs=0.1)
        tok_s = s["output_throughput_tok_s"]
        assert e["tok_s_per_w"] == pytest.approx(tok_s / e["power_w"], rel=1e-3)
        assert e["j_per_token"] == pytest.approx(e["power_w"] / tok_s, rel=1e-3)
    said = next(line for line in out.splitlines() if line.startswith("energy per step"))
    c1, c16 = (s["efficiency"] for s in doc["steps"])
    assert said == (
        f"energy per step (serving GPUs): c=1 {c1['tok_s_per_w']:.3f} tok/s per W, "
        f"{c1['j_per_token']:.3f} J/token · c=16 {c16['tok_s_per_w']:.3f} tok/s per W, "
        f"{c16['j_per_token']:.3f} J/token"
    )
    print(said)
    md = (tmp_path / "s" / "report.md").read_text()
    assert "Energy per step (serving GPUs):" in md and "| tok/s per W | J per token |" in md
    assert "J per token" in (tmp_path / "s" / "report.html").read_text()
