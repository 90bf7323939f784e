"""``infmon compare``: deltas, noise test, config diff and explanations on synthetic runs."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from infmon.journal import JournalWriter
from infmon.model.compare.baseline import METRICS, delta_text
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
    cmp = compare_runs(runs)
    doc = cmp.to_dict()
    text = "\n".join(doc["explanations"])
    assert (
        "spec: spec decoding: acceptance α 0.27 per position, mean acceptance length 1.36" in text
    )
    assert "single-stream (c=1) output tokens/s" in text and "baseline (-" in text
    assert "spec: c=1: spec is" in text and "slower than baseline" in text
    assert "KV capacity fell 39% (drafter weights)" in text
    assert "fp8: faster than baseline" in text
    assert "quality cost: accuracy 75.0% vs 100.0% baseline" in text
    assert "agreement with baseline outputs 75.0%" in text
    diff = {r["key"]: r for r in doc["config_diff"]}
    assert diff["kv_capacity_tokens"]["differs"] and diff["spec_decoding"]["values"][1]
    assert doc["changes"][0][0] == "speculative: none → draft k=3"
    step16 = next(s for s in doc["steps"] if s["x"] == 16)
    fp8 = step16["runs"][2]["tok_s"]
    assert fp8["delta_pct"] > 10 and fp8["beyond_noise"] is True
    assert fp8["ci_pct"][0] > 0
    assert "bootstrap" in doc["noise_method"]
    json.dumps(doc, allow_nan=False)


def test_compares_the_report_figures_themselves(runs):
    """One computation: each compared figure is the report's own step figure (throughput from
    the tokens credited to the measured time, percentiles of the measured requests)."""
    cmp = compare_runs(runs)
    keys = {
        "tok_s": ("output_throughput_tok_s", None, 1),
        "ttft_p50": ("ttft_ms", "p50", 1e3),
        "ttft_p90": ("ttft_ms", "p90", 1e3),
        "tpot_p50": ("tpot_ms", "p50", 1e3),
        "itl_p90": ("itl_ms", "p90", 1e3),
        "e2e_p50": ("e2el_ms", "p50", 1e3),
        "goodput": ("goodput_req_s", None, 1),
    }
    for i, run in enumerate(runs):
        for step in run.doc["steps"]:
            level = next(lv for lv in cmp.levels() if lv.value == step["concurrency"])
            cell = cmp.cell(i, level)
            for key, (name, q, scale) in keys.items():
                want = step[name] if q is None else step[name][q]
                assert cell.get(key).delta.value * scale == pytest.approx(want, rel=1e-6, abs=1e-6)


def _finding12(tmp_path):
    """Throughput ~6 % lower, TTFT ~69 % lower: the comparison issue 17 found contradicting itself."""
    write_synthetic_session(tmp_path / "a", concurrencies=(4, 16), step_duration_s=10, seed=5)
    write_synthetic_session(
        tmp_path / "b",
        concurrencies=(4, 16),
        step_duration_s=10,
        seed=6,
        server=SyntheticServer(tpot_s=0.0226, ttft_s=0.0155),
    )
    return compare_runs([load_run(tmp_path / "a"), load_run(tmp_path / "b")])


def test_table_explanation_and_interval_agree(tmp_path):
    """Issue 17, finding 12: every delta lies inside its own interval, every cell the table
    marks beyond noise is named in the explanation, and "no difference" is never said beside
    a marked cell."""
    cmp = _finding12(tmp_path)
    text = "\n".join(cmp.explanations)
    marked = 0
    for c in cmp.views[0].levels:
        for d in c.metrics:
            x = d.delta
            if x.ci is not None:
                assert x.ci[0] <= x.rel <= x.ci[1], (c.label, d.metric.key, x)
            if x.beyond_noise:
                marked += 1
                assert f"{d.metric.label} " in text and f"at {c.label}" in text
                assert delta_text(d).endswith("*")
    tput = cmp.views[0].levels[0].get("tok_s").delta
    ttft = cmp.views[0].levels[0].get("ttft_p50").delta
    assert -0.12 < tput.rel < -0.02 and tput.beyond_noise is True
    assert ttft.rel < -0.5 and ttft.beyond_noise is True
    assert marked and "no difference beyond noise" not in text
    assert "slower than synthetic" in text or "tok/s -" in text
    rendered = render_text(cmp)
    assert f"{100 * tput.rel:+.0f}%*" in rendered


def test_identical_runs_are_within_noise(tmp_path):
    """Same server, other seed: the headline figures are within noise. Each figure is tested at
    95 % on its own, so among many one may be marked by chance: whatever is marked, the
    explanation names, and nothing else."""
    for name, seed in (("a", 3), ("c", 4)):
        write_synthetic_session(tmp_path / name, concurrencies=(4,), step_duration_s=6, seed=seed)
    cmp = compare_runs([load_run(tmp_path / "a"), load_run(tmp_path / "c")])
    level = cmp.views[0].levels[0]
    for key in ("tok_s", "e2e_p50", "goodput", "ttft_p50"):
        assert level.get(key).delta.beyond_noise is False, key
    marked = [m for m in level.metrics if m.delta.beyond_noise]
    text = "\n".join(cmp.explanations)
    if marked:
        assert all(f"{m.metric.label} " in text for m in marked)
    else:
        assert text.endswith("no difference beyond noise from synthetic")


def test_levels_the_baseline_did_not_run_are_marked_not_interpolated(tmp_path):
    write_synthetic_session(tmp_path / "a", concurrencies=(1, 16), step_duration_s=5)
    write_synthetic_session(tmp_path / "b", concurrencies=(1, 4, 16), step_duration_s=5)
    cmp = compare_runs([load_run(tmp_path / "a"), load_run(tmp_path / "b")])
    c4 = next(c for c in cmp.views[0].levels if c.label == "c=4")
    assert not c4.in_baseline and all(math.isnan(m.delta.base) for m in c4.metrics)
    assert "synthetic (not in baseline)" in render_text(cmp)


def test_render_escapes_names(runs):
    runs[1].name = "<b>spec</b>"
    html = render_html(compare_runs(runs[:2]))
    assert "<b>spec</b>" not in html and "&lt;b&gt;spec&lt;/b&gt;" in html
    assert "beyond noise" in render_text(compare_runs(runs[:2]))


def test_every_metric_is_in_the_rendered_tables(runs):
    text = render_text(compare_runs(runs[:2]))
    for m in METRICS:
        assert m.label in text


def test_vllm_bench_import():
    run = load_run(FIXTURES / "vllm-bench-serve-result.json")
    [step] = run.doc["steps"]
    assert step["concurrency"] == 4 and step["completed"] == 20
    assert step["ttft_ms"]["p50"] == pytest.approx(33.879995500001314)
    assert step["ttft_ms"]["p99"] == pytest.approx(58.22107861998802)
    assert step["output_throughput_tok_s"] == pytest.approx(333.2736174706896)
    [level] = run.levels
    assert level.requests == 20 and level.token_bins.sum() / level.bin_s.sum() == pytest.approx(
        333.2736174706896
    )


def test_report_json_with_its_csv_compares(runs, tmp_path):
    from infmon.report import write_reports

    write_reports(runs[0].source, tmp_path / "rep")
    run = load_run(tmp_path / "rep" / "report.json")
    assert {s.label for s in run.levels} == {"c=1", "c=4", "c=16"}
    cmp = compare_runs([run, runs[2]])
    assert cmp.views[0].levels[0].get("ttft_p50").delta.ci is not None


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
    assert doc["schema"] == "infmon.compare/2" and len(doc["runs"]) == 2
    assert (tmp_path / "c.html").read_text().startswith("<!DOCTYPE html>")
    one = subprocess.run(infmon_cmd("compare", base), cwd=REPO, capture_output=True, text=True)
    assert one.returncode == 2 and "at least two runs" in one.stderr
