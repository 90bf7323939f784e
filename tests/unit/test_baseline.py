"""A run against its baseline: level samples live and from disk, config changes, --fail-if."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infmon.journal.reader import SessionReader
from infmon.model.compare.baseline import (
    RunFacts,
    compare_run,
    config_changes,
    weights_from_model_id,
)
from infmon.model.compare.fail_if import RuleError, check, parse_rules
from infmon.model.steps.ledger import StepLedger
from infmon.report.runs import load_run
from infmon.report.steps import step_events
from tests.synthetic import SyntheticServer, write_synthetic_session
from tests.ui.fakes import record


@pytest.fixture(scope="module")
def sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("base")
    write_synthetic_session(root / "base", concurrencies=(1, 8), step_duration_s=6, seed=1)
    write_synthetic_session(
        root / "slow", concurrencies=(1, 8), step_duration_s=6, seed=2,
        server=SyntheticServer(tpot_s=0.03),
    )  # fmt: skip
    write_synthetic_session(root / "same", concurrencies=(1, 8), step_duration_s=6, seed=3)
    return root


def test_live_levels_give_the_recorded_runs_latencies(sessions):
    """Records fed one by one to the step ledger (the live monitor) give the same level figures
    as the journal's columns (a recorded run): the same selection, the same statistics."""
    run = load_run(sessions / "base")
    reader = SessionReader(sessions / "base")
    ledger = StepLedger()
    ledger.apply(ev for ev, _ in step_events(reader.iter_events()))
    live = ledger.keep_levels()
    for rec in reader.iter_records():
        ledger.add_record(rec)
    got = {s.label: s for s in live.samples(1e9, {})}
    for want in run.levels:
        s = got[want.label]
        np.testing.assert_allclose(np.sort(s.ttft_s), np.sort(want.ttft_s), rtol=1e-9)
        np.testing.assert_allclose(np.sort(s.tpot_s), np.sort(want.tpot_s), rtol=1e-9)
        np.testing.assert_allclose(np.percentile(s.gaps_s, 50), np.percentile(want.gaps_s, 50))
        assert s.output_tokens == want.output_tokens and s.chunks == want.chunks


def test_live_window_tokens_become_bins_of_measured_time():
    from infmon.model.steps.span import CLOSED, Level

    ledger = StepLedger()
    ledger.apply(ledger.book.begin(Level(CLOSED, 4), 0.0, "bench", 1.0))
    live = ledger.keep_levels()
    for i in range(16):  # 250 ms windows from t=0 to 4 s, 25 tokens each
        ledger.add_window(i * 0.25, (i + 1) * 0.25, 25.0, 0.0)
    ledger.add_record(record(0, 1.5, 4, step=1))  # a sample needs one measured request
    [s] = live.samples(4.0, {})
    assert s.bin_s.sum() == pytest.approx(3.0)  # the warm-up second left out
    assert s.token_bins.sum() / s.bin_s.sum() == pytest.approx(100.0)


def test_a_slower_run_fails_the_rule_and_a_same_one_passes(sessions):
    base = load_run(sessions / "base").reference()
    slow, same = load_run(sessions / "slow"), load_run(sessions / "same")
    rules = parse_rules("tok/s<-5%,ttft_p90>+10%")
    failed = check(rules, compare_run(base, slow.levels, slow.facts))
    assert failed and {f.rule.text for f in failed} == {"tok/s<-5%"}
    assert all("beyond noise" in f.text for f in failed)
    assert check(rules, compare_run(base, same.levels, same.facts)) == ()


def test_rules_parse_and_refuse_clearly():
    [a, b] = parse_rules("tok/s<-5%, ttft_p90>+10%")
    assert (a.key, a.op, a.threshold) == ("tok_s", "<", -0.05)
    assert (b.key, b.op, b.threshold) == ("ttft_p90", ">", 0.10)
    assert parse_rules("kv_capacity<-10%")[0].key == "kv_capacity"
    with pytest.raises(RuleError, match="unknown figure 'latency'"):
        parse_rules("latency>5%")
    with pytest.raises(RuleError, match="expected METRIC<N%"):
        parse_rules("tok/s < five")


def test_config_changes_name_dtype_and_speculation():
    base = RunFacts(model="Qwen/Qwen2.5-7B-Instruct", spec_k=0, kv_capacity_tokens=459_696)
    fp8 = RunFacts(model="Qwen/Qwen2.5-7B-Instruct-FP8", spec_k=0, kv_capacity_tokens=500_000)
    spec = RunFacts(model="Qwen/Qwen2.5-7B-Instruct", spec_k=4, kv_capacity_tokens=95_904)
    assert config_changes(base, fp8)[:2] == (
        "dtype auto → fp8",
        "model Qwen/Qwen2.5-7B-Instruct → Qwen/Qwen2.5-7B-Instruct-FP8",
    )
    assert config_changes(base, spec) == (
        "speculative: none → draft k=4",
        "KV capacity 459,696 → 95,904 tokens",
    )
    assert config_changes(RunFacts(), spec) == ()  # nothing known about the baseline
    assert weights_from_model_id("x/Llama-3-8B-AWQ") == "awq (int4)"
    assert weights_from_model_id(None) is None


def test_kv_fill_from_facts():
    f = RunFacts(kv_blocks=5994, kv_block_size=16, tokens_per_seq=160.0)
    assert f.kv_fill == 599
    assert math.isnan(RunFacts().kv_fill)


def test_a_step_whose_client_was_late_is_not_called_beyond_noise(sessions):
    """Issue 25: a run whose client timestamps were late (its self-check said so) compares
    untested at that level, with the reason."""
    from dataclasses import replace

    base = load_run(sessions / "base").reference()
    slow = load_run(sessions / "slow")
    late = tuple(replace(s, client_late=True) for s in slow.levels)
    comparison = compare_run(base, late, slow.facts)
    for level in comparison.levels:
        assert all(m.delta.beyond_noise is None for m in level.metrics), level
        assert level.diagnosis and "timestamps were late in this run" in level.diagnosis
