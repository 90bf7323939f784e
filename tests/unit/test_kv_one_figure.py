"""One KV capacity figure everywhere (issue 26, finding 11).

The server pane said "≈ 1,795 seqs at 256 tokens each" and then "≈ 1,690 seqs at 257 tokens
each", the report "459,696 tokens ≈ 1,690 sequences of 256 tokens" and the knee pane "KV fills
c≈1,795": three roundings of a mean of 256.5 tokens. One rule now (``sequence_tokens``: up to
a whole token; whole blocks per sequence) gives the pane, the knee pane and the report one
figure."""

from __future__ import annotations

import math
from dataclasses import replace

from infmon.clock import FakeClock
from infmon.engine.types import RecordBatch
from infmon.report.server import memory_budget
from tests.ui.fakes import ServerFeed, ended, feeder, new_session, record


def test_the_pane_the_knee_pane_and_the_report_say_one_kv_figure() -> None:
    clock = FakeClock(0.0)
    session = new_session(clock)
    wiring = feeder(session, clock)
    snap = ServerFeed().scrape(1.0, running=2)
    wiring.snapshot(snap)
    recs = []
    for i in range(40):  # the server counts 128 or 129 prompt tokens (a BOS now and then)
        r = ended(record(i, 0.0, 2, tokens=128), 1.0 + 0.1 * i)
        recs.append(r if i % 2 else replace(r, prompt_tokens=129))
    wiring.records(RecordBatch(0, recs))
    clock.advance(5.0)
    view = session.snapshot(clock.now())
    blocks, size = snap.kv_num_gpu_blocks, snap.kv_block_size_tokens
    assert blocks and size
    mean = sum(r.prompt_tokens + r.output_tokens for r in recs) / len(recs)
    assert mean == 256.5
    pane_seqs, pane_tokens = view.server.kv_capacity_seqs, view.server.tokens_per_seq
    assert pane_tokens == 257.0 and pane_seqs == blocks // math.ceil(257 / size)
    assert view.knee.kv_fill_level == pane_seqs
    cfg = {
        "kv_capacity_tokens": snap.kv_capacity_tokens,
        "kv_num_gpu_blocks": blocks,
        "kv_block_size_tokens": size,
    }
    budget = memory_budget(cfg, 128.5, 128.0)  # type: ignore[arg-type]
    assert budget is not None
    assert (budget["kv_capacity_seqs"], budget["tokens_per_seq"]) == (pane_seqs, pane_tokens)


def test_the_one_rounding() -> None:
    from infmon.model.steps.kv_fill import kv_fill_concurrency, sequence_tokens

    assert sequence_tokens(256.0) == 256.0 and sequence_tokens(256.49) == 256.0
    assert sequence_tokens(256.5) == 257.0 and sequence_tokens(0.2) == 1.0
    assert math.isnan(sequence_tokens(math.nan)) and math.isnan(sequence_tokens(0.0))
    # 28,731 blocks of 16: a 256-token sequence takes 16 blocks, a 257-token one 17
    assert kv_fill_concurrency(28_731, 16, 459_696, 256.0) == 1_795
    assert kv_fill_concurrency(28_731, 16, 459_696, 256.6) == 1_690
    assert kv_fill_concurrency(math.nan, math.nan, 459_696, 256.6) == 459_696 // 257
