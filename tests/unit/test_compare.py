"""``infmon compare``: deltas, noise test, config diff and explanations on synthetic runs."""

from __future__ import annotations

import json
import subprocess

import pytest

from infmon.journal import JournalWriter
from infmon.report.compare import compare_runs
from infmon.report.compare_render import render_html, render_text
from infmon.report.runs import RunLoadError, load_run
from tests.conftest import FIXTURES, REPO, infmon_cmd
from tests.synthetic import SyntheticServer, write_synthetic_session

C = (1, 4, 16)


def _quality(correct: int, outputs: list[str]) -> dict:
    results = [{"id": f"p{i}", "output": o, "correct": i < correct} for i, o in enumerate(outputs)]
    return {
        "probes": len(outputs),
        "correct": correct,
        "accuracy": correct / len(outputs),
        "results": results,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cmp")
    write_synthetic_session(root / "base", concurrencies=C, step_duration_s=6)
    write_synthetic_session(
        root / "spec",
        concurrencies=C,
        step_duration_s=6,
        server=SyntheticServer(tpot_s=0.07, spec_acceptance=0.12, kv_capacity_tokens=40000),
    )
    write_synthetic_session(
        root / "fp8", concurrencies=C, step_duration_s=6, server=SyntheticServer(tpot_s=0.012)
    )
    for name, q in (
        ("base", _quality(4, ["a", "b", "c", "d"])),
        ("fp8", _quality(3, ["a", "b", "x", "d"])),
    ):
        with JournalWriter(root / name, autoflush=False) as j:
            j.write_quality(q)
    return [load_run(root / n) for n in ("base", "spec", "fp8")]


def test_explains_spec_regression_and_fp8_speedup_with_quality_cost(runs):
    runs[0].name, runs[1].name, runs[2].name = "baseline", "spec", "fp8"
    doc = compare_runs(runs)
    text = "\n".join(doc["explanations"])
    assert "spec: spec decoding: acceptance 0.12" in text
    assert "single-stream (c=1) output tokens/s" in text and "baseline (-" in text
    assert "KV capacity fell 39% (drafter weights)" in text
    assert "fp8: faster than baseline" in text
    assert "quality cost: accuracy 75.0% vs 100.0% baseline" in text
    assert "agreement with baseline outputs 75.0%" in text
    diff = {r["key"]: r for r in doc["config_diff"]}
    assert diff["kv_capacity_tokens"]["differs"] and diff["spec_decoding"]["values"][1]
    step16 = next(s for s in doc["steps"] if s["x"] == 16)
    fp8 = step16["runs"][2]["out_tok_s"]
    assert fp8["delta_pct"] > 10 and fp8["beyond_noise"] is True
    assert fp8["ci_pct"][0] > 0
    assert "bootstrap" in doc["noise_method"]


def test_identical_runs_are_within_noise(tmp_path):
    for name in ("a", "b"):
        write_synthetic_session(tmp_path / name, concurrencies=(4,), step_duration_s=6, seed=3)
    write_synthetic_session(tmp_path / "c", concurrencies=(4,), step_duration_s=6, seed=4)
    doc = compare_runs([load_run(tmp_path / "a"), load_run(tmp_path / "c")])
    cell = doc["steps"][0]["runs"][1]["e2el_p50_ms"]
    assert cell["beyond_noise"] is False
    assert doc["explanations"][-1].endswith("no difference beyond noise from synthetic")


def test_render_escapes_names(runs):
    runs[1].name = "<b>spec</b>"
    html = render_html(compare_runs(runs[:2]))
    assert "<b>spec</b>" not in html and "&lt;b&gt;spec&lt;/b&gt;" in html
    assert "beyond noise" in render_text(compare_runs(runs[:2]))


def test_vllm_bench_import():
    run = load_run(FIXTURES / "vllm-bench-serve-result.json")
    [step] = run.doc["steps"]
    assert step["concurrency"] == 4 and step["completed"] == 20
    assert step["ttft_ms"]["p50"] == pytest.approx(33.879995500001314)
    assert step["ttft_ms"]["p99"] == pytest.approx(58.22107861998802)
    assert step["output_throughput_tok_s"] == pytest.approx(333.2736174706896)
    assert len(run.samples[4]["e2el_ms"]) == 20


def test_unknown_input_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(RunLoadError, match="not an infmon report"):
        load_run(bad)


def test_cli_compare_json_and_html(runs, tmp_path):
    base, spec = runs[0].source, runs[1].source
    out = subprocess.run(
        infmon_cmd("compare", base, spec, "--json", "--html", str(tmp_path / "c.html")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "infmon.compare/1" and len(doc["runs"]) == 2
    assert (tmp_path / "c.html").read_text().startswith("<!DOCTYPE html>")
    one = subprocess.run(infmon_cmd("compare", base), cwd=REPO, capture_output=True, text=True)
    assert one.returncode == 2 and "at least two runs" in one.stderr
