"""Samples → snapshot: two engines, windows between pages, restarts, missing metrics, garbage."""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.sources.backends import table_named
from infmon.sources.canonical import restarted, snapshot_from, snapshot_of_page
from infmon.sources.exposition import ExpositionError, parse_exposition
from infmon.sources.readings import read_page


def page(gen0: float, gen1: float, ttft_le1: float = 1.0, extra: str = "") -> str:
    lines = ["# TYPE vllm:num_requests_running gauge"]
    for e, run, kv in (("0", 3, 0.25), ("1", 5, 0.75)):
        lines.append(f'vllm:num_requests_running{{engine="{e}",model_name="m"}} {run}.0')
        lines.append(f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="m"}} {kv}')
    lines += [
        "# TYPE vllm:generation_tokens_total counter",
        f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {gen0}',
        f'vllm:generation_tokens_total{{engine="1",model_name="m"}} {gen1}',
        "# TYPE vllm:time_to_first_token_seconds histogram",
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="1.0",model_name="m"}} {ttft_le1}',
        f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="m"}} {ttft_le1}',
        f'vllm:time_to_first_token_seconds_count{{engine="0",model_name="m"}} {ttft_le1}',
        f'vllm:time_to_first_token_seconds_sum{{engine="0",model_name="m"}} {ttft_le1 * 0.5}',
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="100"} 1.0',
        'vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="100"} 1.0',
        extra,
    ]
    return "\n".join(lines) + "\n"


def test_two_engines_summed_and_per_label() -> None:
    snap = snapshot_of_page(parse_exposition(page(10, 30)))
    assert snap.backend == "vllm-v1"
    assert snap.running == 8.0 and snap.generation_tokens_total == 40.0
    assert snap.kv_cache_usage == 0.5
    assert snap.kv_capacity_tokens == 2 * 16 * 100
    assert snap.kv_capacity_seqs(20, 12) == 100.0  # 2 blocks per sequence, 200 blocks
    rows = {e.key: e for e in snap.engines}
    assert rows["model_name=m,engine=0"].running == 3.0
    assert rows["model_name=m,engine=1"].generation_tokens_total == 30.0
    assert rows["model_name=m,engine=1"].kv_capacity_tokens == 1600


def test_window_rates_between_pages() -> None:
    a = read_page(parse_exposition(page(10, 30, ttft_le1=2)))
    b = read_page(parse_exposition(page(20, 60, ttft_le1=6)))
    snap = snapshot_from(b, a, timestamp_s=4.0, window_s=2.0)
    assert snap.generation_tokens_per_s == 20.0 and not snap.server_restarted
    assert snap.latency_s["ttft"].count == 4.0 and snap.latency_s["ttft"].mean == 0.5
    rows = {e.key: e for e in snap.engines}
    assert rows["model_name=m,engine=1"].generation_tokens_per_s == 15.0


def test_counter_reset_is_surfaced_never_negative() -> None:
    a = read_page(parse_exposition(page(1000, 3000, ttft_le1=50)))
    b = read_page(parse_exposition(page(4, 6, ttft_le1=1)))  # the server restarted
    snap = snapshot_from(b, a, timestamp_s=1.0, window_s=1.0)
    assert snap.server_restarted
    assert snap.generation_tokens_per_s == 10.0
    assert snap.latency_s["ttft"].count == 1.0


def test_a_restart_seen_only_in_a_histogram_or_one_engine_is_surfaced() -> None:
    """Restart detection reads every series of both pages, not the side effects of the
    snapshot's own reads: a reset seen only in the TTFT histogram (its counters grew) or in
    one engine's counter (the sum grew) still marks the snapshot, whatever order the
    snapshot's fields are computed in."""
    before = read_page(parse_exposition(page(10, 30, ttft_le1=50)))
    hist_only = read_page(parse_exposition(page(20, 60, ttft_le1=3)))
    one_engine = read_page(parse_exposition(page(900, 5, ttft_le1=60)))
    grown = read_page(parse_exposition(page(20, 60, ttft_le1=60)))
    for cur in (hist_only, one_engine):
        assert restarted(cur, before)
        assert snapshot_from(cur, before, timestamp_s=1.0, window_s=1.0).server_restarted
    assert not restarted(grown, before) and not restarted(grown, None)
    assert not snapshot_from(grown, before, timestamp_s=1.0, window_s=1.0).server_restarted


def test_missing_metrics_are_unknown_not_zero() -> None:
    snap = snapshot_of_page(parse_exposition(page(1, 2)))
    assert snap.waiting is None and snap.preemptions_total is None
    assert snap.prompt_tokens_total is None and snap.spec_decode is None
    assert "itl" not in snap.latency_s and snap.prefix_cache_hit_rate is None
    assert snap.max_model_len is None
    empty = snapshot_of_page(parse_exposition(""))
    assert empty.backend is None and empty.running is None and empty.kv_capacity_tokens is None


def test_spec_decode_v1_counters() -> None:
    extra = "\n".join(
        [
            'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0',
            'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0',
            'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 120.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 70.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 35.0',
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 15.0',
        ]
    )
    sd = snapshot_of_page(parse_exposition(page(1, 2, extra=extra))).spec_decode
    assert sd is not None
    assert sd.acceptance_rate == 0.4 and sd.mean_acceptance_length == 2.2
    assert sd.acceptance_per_position == (0.7, 0.35, 0.15)


def test_backend_override() -> None:
    text = "tgi_queue_size 4.0\n"
    assert snapshot_of_page(parse_exposition(text)).waiting == 4.0
    forced = snapshot_of_page(parse_exposition(text), table_named("vllm-v1"))
    assert forced.backend == "vllm-v1" and forced.waiting is None


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary()))
def test_garbage_raises_only_exposition_error(data: str | bytes) -> None:
    with contextlib.suppress(ExpositionError):
        snapshot_of_page(parse_exposition(data))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "vllm:num_requests_running",
                'vllm:kv_cache_usage_perc{engine="0"}',
                "{",
                "}",
                " ",
                "\n",
                "1.0",
                "NaN",
                "+Inf",
                "# TYPE x counter",
                '_bucket{le="',
                '"}',
                "x_total",
                "_sum",
                "# EOF",
            ]
        )
    ).map("".join)
)
def test_near_exposition_garbage(text: str) -> None:
    with contextlib.suppress(ExpositionError):
        snapshot_of_page(parse_exposition(text))
