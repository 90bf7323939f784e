import math

from infmon.model.live.dashboard import ServerView, SpecView
from infmon.model.live.diagnose import DiagnosisInputs, diagnose


def inputs(server=None, **kw):
    base = dict(
        server=server or ServerView(has_data=True),
        client_output_tokens_per_s=math.nan,
        recent_client_series=(),
        step_age_s=60.0,
        load_mode="closed",
        load_level=8.0,
        inflight_requests=8,
        paused=False,
    )
    base.update(kw)
    return DiagnosisInputs(**base)


def texts(i):
    return [d.text for d in diagnose(i)]


def test_quiet_when_nothing_is_wrong():
    assert texts(inputs()) == []


def test_kv_full_with_preemptions():
    sv = ServerView(has_data=True, kv_usage_fraction=0.97, preemptions_per_s=12.4)
    assert "KV cache full: 12 preemptions/s" in texts(inputs(sv))
    assert (
        texts(inputs(ServerView(has_data=True, kv_usage_fraction=0.97, preemptions_per_s=0))) == []
    )


def test_queueing_at_max_num_seqs():
    sv = ServerView(has_data=True, running=256, max_num_seqs=256, waiting=12)
    assert texts(inputs(sv)) == ["queueing: 12 waiting, running at max_num_seqs 256"]


def test_client_bottleneck():
    out = texts(inputs(inflight_requests=20, load_level=32.0))
    assert out == ["client is the bottleneck: 20 of 32 streams in flight"]
    assert texts(inputs(inflight_requests=20, load_level=32.0, step_age_s=2.0)) == []


def test_throughput_fell_at_constant_load():
    series = (1000.0,) * 20 + (700.0,) * 5
    out = texts(
        inputs(client_output_tokens_per_s=700.0, recent_client_series=series, step_age_s=60)
    )
    assert out == ["throughput fell 30% at constant load: contention?"]
    # with a queue building it is not contention
    sv = ServerView(has_data=True, waiting=5)
    out = texts(inputs(sv, client_output_tokens_per_s=700.0, recent_client_series=series))
    assert not any("fell" in t for t in out)


def test_low_acceptance():
    sv = ServerView(has_data=True, spec=SpecView(0.12, 1.1, (0.2, 0.1)))
    assert texts(inputs(sv)) == [
        "low acceptance α 0.09 per position, mean acceptance length 1.10 (k=2): drafts may cost "
        "more than they save"
    ]


def test_server_down_first():
    sv = ServerView(has_data=True, up=False, error="connection refused", waiting=3)
    assert texts(inputs(sv))[0] == "server not answering: connection refused"
