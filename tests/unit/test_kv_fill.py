"""KV capacity against the knee: the fill concurrency and which limit a knee came from."""

from __future__ import annotations

import math

from infmon.model.steps.evidence import ServerEvidence
from infmon.model.steps.knee import Knee
from infmon.model.steps.kv_fill import (
    COMPUTE,
    KV,
    MAX_NUM_SEQS,
    knee_limit,
    kv_fill_concurrency,
    max_num_seqs_seen,
)
from infmon.report.stepstats import knee_point


def test_fill_counts_whole_blocks_per_sequence():
    assert kv_fill_concurrency(5994, 16, 95904, 160) == 599  # 10 blocks a sequence
    assert kv_fill_concurrency(5994, 16, 95904, 161) == 544  # 11 blocks
    assert kv_fill_concurrency(math.nan, math.nan, 10_000, 256) == 39
    assert math.isnan(kv_fill_concurrency(100, 16, 1600, math.nan))


def _step(c, tok, e2e, running=math.nan, waiting=math.nan, kv=math.nan, pre=math.nan):
    ev = ServerEvidence(5, running, running, waiting, kv, pre)
    return {
        "concurrency": c,
        "output_throughput_tok_s": tok,
        "e2el_ms": {"p50": e2e},
        "server_evidence": ev.to_dict(),
    }


def test_knee_from_kv_preemptions():
    steps = [_step(16, 800, 700, 16, 0, 0.5, 0), _step(32, 1500, 750, 32, 0, 0.9, 0),
             _step(64, 1550, 1400, 40, 24, 1.0, 30)]  # fmt: skip
    limit = knee_limit(Knee(32, "", True, "server"), [knee_point(s) for s in steps], kv_fill=42)
    assert limit.kind == KV and "30 preemptions at c=64" in limit.text and "c≈42" in limit.text


def test_knee_from_max_num_seqs():
    steps = [_step(128, 5000, 700, 128, 0, 0.3, 0), _step(256, 8000, 800, 256, 0, 0.5, 0),
             _step(512, 8100, 1600, 256, 256, 0.5, 0)]  # fmt: skip
    limit = knee_limit(Knee(256, "", True, "server"), [knee_point(s) for s in steps], kv_fill=2873)
    assert limit.kind == MAX_NUM_SEQS and limit.text.startswith("max_num_seqs ≈ 256 (inferred")


def test_knee_from_compute():
    steps = [_step(8, 400, 700, 8, 0, 0.1, 0), _step(16, 420, 1300, 16, 0, 0.2, 0),
             _step(32, 425, 2600, 32, 0, 0.4, 0)]  # fmt: skip
    limit = knee_limit(
        Knee(8, "", True, "throughput"), [knee_point(s) for s in steps], kv_fill=2873
    )
    assert limit.kind == COMPUTE


def test_no_knee_no_limit_and_no_metrics_says_so():
    assert knee_limit(None, [], 10).kind == ""
    steps = [_step(8, 400, 700), _step(16, 420, 1300), _step(32, 425, 2600)]
    assert knee_limit(
        Knee(8, "", True, "throughput"), [knee_point(s) for s in steps], math.nan
    ).text.startswith("limit unknown")


def test_max_num_seqs_seen_from_steps_that_queued():
    ev = [ServerEvidence(5, 100, 100, 0), ServerEvidence(5, 256, 256, 200)]
    assert max_num_seqs_seen(ev) == 256
    assert math.isnan(max_num_seqs_seen(ev[:1]))
