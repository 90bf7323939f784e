"""What an operator hands on from a run: its name, its SLO verdict, the SLO a second run
repeats, reports that hold the quality result, and the comparison over the runs."""

from __future__ import annotations

import json

import pytest

from infmon.commands import method, quality
from infmon.config_values import parse_slo
from infmon.journal import JournalWriter
from infmon.model.steps.slo_verdict import slo_verdict
from infmon.report import write_reports
from infmon.report.compare import compare_runs
from infmon.report.compare_render import render_html, render_text
from infmon.report.runs import load_run
from tests.synthetic import write_synthetic_session

C = (1, 4, 16)


def _step(c: int, attainment: float) -> dict:
    return {"concurrency": c, "slo_attainment": attainment, "output_throughput_tok_s": 10.0 * c}


@pytest.mark.parametrize(
    ("attainments", "text"),
    [
        ((1.0, 1.0, 1.0), "≥ 16, not reached"),
        ((1.0, 1.0, 0.5), "c=4"),
        ((0.2, 0.1, 0.0), "none met"),
    ],
)
def test_slo_verdict_says_not_reached_and_none_met(attainments, text):
    steps = [_step(c, a) for c, a in zip(C, attainments, strict=True)]
    verdict = slo_verdict(steps, slo_set=True)
    assert verdict.text() == text
    if text == "none met":
        assert verdict.sentence() == "SLO: none met (c=1 already missed it)."
    assert slo_verdict(steps, slo_set=False).text() == "no SLO set"


@pytest.fixture(scope="module")
def unnamed(tmp_path_factory):
    """Two sessions recorded without ``--label`` (the default "run") in runs/baseline, runs/spec."""
    root = tmp_path_factory.mktemp("runs")
    for name in ("baseline", "spec"):
        write_synthetic_session(root / name, concurrencies=C, step_duration_s=6, label="run")
        write_reports(root / name)
    return root


def test_runs_are_named_by_their_directory_not_run(unnamed):
    runs = [load_run(unnamed / n) for n in ("baseline", "spec")]
    assert [r.name for r in runs] == ["baseline", "spec"]
    cmp = compare_runs(runs)
    text, page = render_text(cmp), render_html(cmp)
    assert text.startswith("compare: baseline baseline vs spec")
    assert "<title>infmon compare: baseline vs spec</title>" in page
    for name in ("baseline", "spec"):
        assert "infmon report: run" not in (unnamed / name / "report.md").read_text()
        assert f"# infmon report: {name}" in (unnamed / name / "report.md").read_text()
        assert (
            f"<title>infmon report: {name}</title>" in (unnamed / name / "report.html").read_text()
        )
    assert "run (2)" not in text and " run " not in text.splitlines()[0]


@pytest.mark.parametrize(
    ("slo", "verdict"),
    [("ttft=100s", "≥ 16, not reached"), ("ttft=1ms", "none met")],
)
def test_reports_say_the_slo_verdict(tmp_path, slo, verdict):
    write_synthetic_session(tmp_path / "s", concurrencies=C, step_duration_s=6, slo=slo)
    write_reports(tmp_path / "s")
    md = (tmp_path / "s" / "report.md").read_text()
    assert f"**SLO limit:** {verdict}" in md
    html = (tmp_path / "s" / "report.html").read_text()
    assert f"<b>SLO limit:</b> {verdict}" in html
    text = render_text(compare_runs([load_run(tmp_path / "s"), load_run(tmp_path / "s")]))
    assert f"SLO limit {verdict}" in text


def test_a_run_against_a_baseline_repeats_its_slo():
    recorded = {"slo": {"ttft_s": 0.5, "tpot_s": 0.05, "e2el_s": None}, "concurrency": [1, 4]}
    options = method.repeated_options(recorded)
    assert options["slo"] == "ttft=500ms,tpot=50ms"
    assert parse_slo(options["slo"]).to_dict() == recorded["slo"]
    assert "slo" not in method.repeated_options({"slo": {"ttft_s": None}})


def test_no_python_none_in_an_explanation_when_a_run_has_no_slo(tmp_path):
    write_synthetic_session(tmp_path / "base", concurrencies=C, step_duration_s=6)
    write_synthetic_session(tmp_path / "fp8", concurrencies=C, step_duration_s=6, slo=None)
    cmp = compare_runs([load_run(tmp_path / "base"), load_run(tmp_path / "fp8")])
    text = render_text(cmp)
    assert "None" not in text, text


def test_quality_rebuilds_the_reports_a_run_wrote(unnamed):
    session = unnamed / "spec"
    assert "No quality run" in (session / "report.html").read_text()
    doc = {"probes": 2, "correct": 2, "accuracy": 1.0, "results": [], "model": "m", "url": "u"}
    with JournalWriter(session, autoflush=False) as j:
        j.write_quality(doc)
    quality._rebuild_reports(session, err=False)
    assert "No quality run" not in (session / "report.html").read_text()
    assert "## Output quality" in (session / "report.md").read_text()


def test_method_writes_runs_compare_txt_with_one_change(tmp_path):
    runs_dir = tmp_path / "runs"
    for name in ("baseline", "fp8"):
        write_synthetic_session(runs_dir / name, concurrencies=C, step_duration_s=6, label=name)
    (runs_dir / "fp8" / method.METHOD_FILE).write_text(
        json.dumps({"label": "fp8", "baseline": str(runs_dir / "baseline"), "seed": "1"})
    )
    method._compare_all(runs_dir / "baseline", runs_dir)
    assert (runs_dir / "compare.txt").read_text().startswith("compare: baseline baseline vs fp8")
    assert json.loads((runs_dir / "compare.json").read_text())


def test_the_drafter_is_named_from_the_servers_speculative_config():
    from prometheus_client import generate_latest

    from infmon.model.compare.baseline import RunFacts, config_changes
    from infmon.sim.engine import Engine
    from infmon.sim.metrics import SimMetrics
    from infmon.sim.scenarios import SCENARIOS, build_config
    from infmon.sources.canonical import snapshot_of_page
    from infmon.sources.exposition import parse_exposition

    cfg = build_config(SCENARIOS["spec-pitfall"])
    page = generate_latest(SimMetrics(cfg, Engine(cfg).budget).registry).decode()
    snap = snapshot_of_page(parse_exposition(page))
    assert cfg.drafter is not None
    assert (
        snap.spec_config["model"] == cfg.drafter.name == "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B"
    )
    cur = RunFacts(spec_k=3, drafter=cfg.drafter.name)
    assert config_changes(RunFacts(spec_k=0), cur) == (
        "speculative: none → draft k=3 (deepseek-ai/DeepSeek-R1-Distill-Qwen-7B)",
    )


def test_scrape_takes_the_openai_base_url_as_bench_does():
    from infmon.commands.scrape import server_url

    assert server_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    assert server_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
    assert server_url("http://127.0.0.1:8000/metrics") == "http://127.0.0.1:8000/metrics"
