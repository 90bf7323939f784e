"""Real vLLM with ngram speculative decoding: infmon's acceptance figures equal the counters'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import running_sim
from tests.real.harness import SPEC_FAMILIES, complete, explain, get_text, infmon, rs, sample_sum
from tests.real.test_vllm_scrape import check_parity

pytestmark = pytest.mark.real_server

# Repetitive prompts give the ngram proposer something to draft from. The tiny random model falls
# into loops when greedy (drafts accepted) and wanders when sampled (drafts rejected): a mix gives
# an acceptance rate strictly between 0 and 1.
PROMPTS = [f"{w} {w} {w} {w} {w} {w} {w} {w}" for w in ("alpha beta", "x = 1;", "def f(): pass")]
TEMPERATURES = (0.0, 1.0)
COUNTERS = {
    "drafts_total": "vllm:spec_decode_num_drafts_total",
    "draft_tokens_total": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens_total": "vllm:spec_decode_num_accepted_tokens_total",
}


def _load(url: str, rounds: int) -> None:
    for _ in range(rounds):
        for prompt in PROMPTS:
            for temperature in TEMPERATURES:
                complete(url, prompt, max_tokens=32, temperature=temperature)


def _counters(page: str) -> dict[str, float]:
    return {key: sample_sum(page, name) for key, name in COUNTERS.items()}


def test_spec_decode_figures_equal_the_counters(vllm_spec: rs.Server, tmp_path: Path) -> None:
    _load(vllm_spec.url, 2)
    page = get_text(vllm_spec.url + "/metrics")
    proc = infmon("scrape", vllm_spec.url, "--json", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    assert _counters(get_text(vllm_spec.url + "/metrics")) == _counters(page), "page moved"
    spec = json.loads(proc.stdout)["spec_decode"]
    c = _counters(page)
    assert 0 < c["accepted_tokens_total"] < c["draft_tokens_total"], c
    for key, value in c.items():
        assert spec[key] == pytest.approx(value), (key, spec)
    # From one page the figures are the counters' ratios since the server started.
    assert spec["acceptance_rate"] == pytest.approx(
        c["accepted_tokens_total"] / c["draft_tokens_total"]
    )
    assert spec["mean_acceptance_length"] == pytest.approx(
        1 + c["accepted_tokens_total"] / c["drafts_total"]
    )
    per_pos = [
        sample_sum(page, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(i))
        for i in range(rs.SPEC_CONFIG["num_speculative_tokens"])
    ]
    assert spec["acceptance_per_position"] == pytest.approx(
        [n / c["drafts_total"] for n in per_pos]
    )
    print(f"\nreal ngram spec decoding: {c}, acceptance {spec['acceptance_rate']:.3f}")


def test_spec_decode_window_between_two_pages(vllm_spec: rs.Server, tmp_path: Path) -> None:
    _load(vllm_spec.url, 1)
    a = get_text(vllm_spec.url + "/metrics")
    _load(vllm_spec.url, 2)
    b = get_text(vllm_spec.url + "/metrics")
    (tmp_path / "a.prom").write_text(a)
    (tmp_path / "b.prom").write_text(b)
    proc = infmon("scrape", "a.prom", "b.prom", "--interval", "5", "--json", cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    data = json.loads(proc.stdout)
    ca, cb = _counters(a), _counters(b)
    d = {k: cb[k] - ca[k] for k in ca}
    assert 0 < d["accepted_tokens_total"] < d["draft_tokens_total"], d
    assert data["window_s"] == pytest.approx(5)
    window = data["spec_decode"]  # with two pages: the window between them
    assert window["acceptance_rate"] == pytest.approx(
        d["accepted_tokens_total"] / d["draft_tokens_total"]
    )
    assert window["mean_acceptance_length"] == pytest.approx(
        1 + d["accepted_tokens_total"] / d["drafts_total"]
    )


def test_spec_metric_parity_with_sim(vllm_spec: rs.Server) -> None:
    _load(vllm_spec.url, 1)
    real_page = get_text(vllm_spec.url + "/metrics")
    with running_sim("--scenario", "spec-good", "--seed", "1") as sim_url:
        sim_page = get_text(sim_url + "/metrics")
    check_parity(real_page, sim_page, SPEC_FAMILIES)
