import math

import numpy as np

from infmon.model.records import RequestRecord
from infmon.model.session import Session, SessionConfig, percentiles
from infmon.model.stats import SLO


def rec(i, sent, ttft=0.1, n=10, gap=0.02, error=None):
    chunks = tuple(sent + ttft + k * gap for k in range(n)) if error is None else ()
    end = chunks[-1] if chunks else sent + ttft
    return RequestRecord(
        i, sent, chunks, end, output_tokens=n if error is None else None, error_kind=error
    )


def test_percentiles_match_numpy_linear():
    vals = [0.5, 0.1, 0.9, 0.3, 0.7, 0.2]
    p = percentiles(vals)
    ref = np.percentile(vals, [50, 90, 99])
    assert (p.p50_s, p.p90_s, p.p99_s) == tuple(float(x) for x in ref)
    assert p.count == 6
    assert math.isnan(percentiles([]).p50_s)


def test_empty_session_snapshot_has_nan_not_zero():
    s = Session(SessionConfig(endpoint="http://x"))
    snap = s.snapshot(0.5)
    assert math.isnan(snap.throughput.client_output_tokens_per_s)
    assert math.isnan(snap.latency.ttft.p50_s)
    assert not snap.server.has_data
    assert snap.header.state == "paused"


def test_throughput_latency_and_series():
    s = Session(SessionConfig(throughput_window_s=10, window_s=30))
    s.set_load("closed", 4, 0.0)
    s.set_paused(False, 0.0)
    for i in range(20):
        s.add_record(rec(i, sent=i * 0.5, ttft=0.2, n=11, gap=0.01))
    snap = s.snapshot(10.5)
    # records finished in (0.5, 10.5]: 20 records each 11 tokens, all but none outside
    done = [
        r for r in (rec(i, i * 0.5, 0.2, 11, 0.01) for i in range(20)) if 0.5 <= r.end_s <= 10.5
    ]
    assert snap.throughput.client_output_tokens_per_s == len(done) * 11 / 10
    assert abs(snap.latency.ttft.p50_s - 0.2) < 1e-9
    assert abs(snap.latency.tpot.p50_s - 0.01) < 1e-9
    assert len(snap.throughput.client_series) == 10
    assert snap.header.state == "running"
    assert snap.header.load_level == 4


def test_errors_excluded_from_latency_but_counted():
    s = Session()
    s.set_load("closed", 1, 0.0)
    s.add_record(rec(0, 0.0, ttft=0.3))
    s.add_record(rec(1, 0.1, error="http"))
    snap = s.snapshot(2.0)
    assert snap.latency.ttft.count == 1
    assert snap.throughput.error_fraction == 0.5


def test_steps_knee_and_baseline():
    s = Session(SessionConfig(step_warmup_s=0.0, min_step_s=5.0))
    tok_per_s = {1: 100, 2: 200, 4: 390, 8: 400}
    t = 0.0
    i = 0
    for level, rate in tok_per_s.items():
        s.set_load("closed", level, t)
        for k in range(10):
            s.add_record(rec(i, sent=t + k, ttft=0.1, n=rate, gap=0.0005))
            i += 1
        t += 10.0
    # the running step's figures are not final: no knee is called on them
    assert s.snapshot(t).knee.knee_level is None
    s.set_load("closed", 16, t)
    snap = s.snapshot(t + 1)
    levels = [p.level for p in snap.knee.steps]
    assert levels == [1, 2, 4, 8]
    assert snap.knee.knee_level == 4
    assert s.set_baseline(t + 1) == 4
    assert s.snapshot(t + 1).header.baseline_step == 4


def test_step_throughput_counts_tokens_generated_inside_the_step():
    s = Session(SessionConfig(step_warmup_s=0.0, min_step_s=1.0))
    s.set_load("closed", 1, 0.0)
    s.set_load("closed", 2, 10.0)
    # one request streaming 100 tokens evenly from t=5 to t=15: half in each step
    chunks = tuple(5.0 + 0.1 * k for k in range(100))
    s.add_record(RequestRecord(0, 4.9, chunks, chunks[-1], output_tokens=100))
    first, second = s.step_points(20.0)
    assert first.output_tokens_per_s == 50 / 10
    assert second.output_tokens_per_s == 50 / 10
    assert first.settled and not second.settled


def test_slo_goodput_and_limit():
    s = Session(SessionConfig(slo=SLO(ttft_s=0.5), step_warmup_s=0.0))
    s.set_load("closed", 1, 0.0)
    for k in range(5):
        s.add_record(rec(k, k, ttft=0.1))
    s.set_load("closed", 2, 6.0)
    for k in range(5):
        s.add_record(rec(10 + k, 6 + k, ttft=0.9))
    snap = s.snapshot(12.0)
    assert snap.knee.slo_limit_level == 1
    # the 10 s window holds 3 good requests from c=1 and 5 slow ones from c=2
    assert snap.throughput.goodput_requests_per_s == 0.3
    assert snap.throughput.requests_per_s == 0.8


def test_server_down_and_back():
    s = Session()
    s.add_server({"running": 3, "waiting": 0, "kv_cache_usage": 0.5}, 1.0)
    assert s.snapshot(1.0).server.running == 3
    s.server_failed(4.0, "connection refused")
    snap = s.snapshot(5.0)
    assert not snap.server.up and snap.server.down_since_s == 4.0
    assert snap.header.state == "server down"
    assert snap.server.stale_s == 4.0
    assert any("server down" in e.text for e in snap.events)
    s.add_server({"running": 1}, 6.0)
    assert s.snapshot(6.0).server.up
    assert any(e.text == "server back up" for e in s.snapshot(6.0).events)


def test_marks_events_and_bounded_memory():
    s = Session(SessionConfig(history_samples=5, max_events=3, max_window_records=4))
    s.set_load("closed", 1, 0.0)
    for i in range(10):
        s.add_record(rec(i, i))
    s.add_mark(9.0, "switched to FP8")
    snap = s.snapshot(20.0)
    assert len(snap.throughput.client_series) == 5
    assert len(snap.events) <= 3
    assert snap.events[-1].text.startswith("mark") or any("FP8" in e.text for e in snap.events)
    assert len(s._recent) == 4


def test_diagnosis_becomes_one_event():
    s = Session()
    s.set_load("closed", 1, 0.0)
    s.add_server({"kv_cache_usage": 0.99, "preemptions_per_s": 12.0, "waiting": 3}, 0.0)
    s.snapshot(1.0)
    s.snapshot(2.0)
    snap = s.snapshot(3.0)
    assert "KV cache full: 12 preemptions/s" in snap.diagnosis
    assert sum("KV cache full" in e.text for e in snap.events) == 1


def test_ingests_the_canonical_server_snapshot():
    from infmon.model.server import ServerSnapshot, SourceState, SpecDecode, WindowStat, unavailable

    s = Session()
    s.add_record(RequestRecord(0, 0.0, (0.1, 0.2), 0.2, prompt_tokens=100, output_tokens=28))
    snap = ServerSnapshot(
        timestamp_s=1.0,
        backend="vllm-v1",
        backend_version="0.32",
        models=("m",),
        running=4.0,
        waiting=1.0,
        kv_cache_usage=0.5,
        prefix_cache_hit_rate=0.25,
        preemptions_per_s=0.5,
        generation_tokens_per_s=300.0,
        latency_s={"queue": WindowStat(mean=0.003), "prefill": WindowStat(mean=0.04)},
        spec_decode=SpecDecode(
            acceptance_rate=0.7, mean_acceptance_length=2.4, acceptance_per_position=(0.8, 0.6)
        ),
        kv_capacity_tokens=16 * 1000,
        kv_block_size_tokens=16,
        kv_num_gpu_blocks=1000,
    )
    s.ingest_server_snapshot(snap, 1.0)
    view = s.snapshot(1.0)
    sv = view.server
    assert (sv.running, sv.waiting, sv.kv_usage_fraction) == (4.0, 1.0, 0.5)
    assert sv.queue_s == 0.003 and sv.prefill_s == 0.04 and math.isnan(sv.decode_s)
    assert sv.kv_capacity_seqs == 1000 // 8  # 128 tokens = 8 blocks of 16
    assert sv.spec.per_position_acceptance == (0.8, 0.6)
    assert view.header.model == "m" and view.header.backend == "vllm-v1"
    assert math.isnan(sv.max_num_seqs)
    s.ingest_server_snapshot(unavailable(3.0, SourceState.DOWN, "connect", "refused"), 3.0)
    down = s.snapshot(3.0).server
    assert not down.up and down.down_since_s == 3.0 and down.error == "connect: refused"
    assert down.running == 4.0  # last values kept, shown stale


def test_server_generation_rate_spans_the_clients_window():
    """1 s scrapes that swing (long engine steps) read as their mean over the client's span."""
    from infmon.model.server import ServerSnapshot

    s = Session(SessionConfig(throughput_window_s=10.0))
    for i in range(1, 21):  # 3k and 9k tokens/s alternating, one scrape per second
        snap = ServerSnapshot(
            timestamp_s=float(i), generation_tokens_per_s=3000.0 if i % 2 else 9000.0, window_s=1.0
        )
        s.ingest_server_snapshot(snap, float(i))
        s.add_record(RequestRecord(i, i - 0.5, (i - 0.4, i - 0.1), i - 0.1, output_tokens=2))
    assert s.snapshot(20.0).throughput.server_generation_tokens_per_s == 6000.0
    tail = s.snapshot(20.0).throughput.server_series[-5:]
    assert all(abs(v - 6000.0) <= 600.0 for v in tail), tail  # no longer 3k, 9k, 3k …
    # A window of unequal scrape intervals weighs each rate by the time it covers.
    lone = Session(SessionConfig(throughput_window_s=10.0))
    lone.ingest_server_snapshot(
        ServerSnapshot(timestamp_s=1.0, generation_tokens_per_s=100.0, window_s=3.0), 1.0
    )
    lone.ingest_server_snapshot(
        ServerSnapshot(timestamp_s=2.0, generation_tokens_per_s=500.0, window_s=1.0), 2.0
    )
    assert lone.snapshot(2.0).throughput.server_generation_tokens_per_s == 200.0
