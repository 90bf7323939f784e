"""The low items of #27 (finding 9): a repeated series is not summed, a negative histogram
count is unknown, a Markdown link in a model id is inert."""

from __future__ import annotations

from infmon.sources.exposition import parse_exposition
from infmon.sources.readings import read_histogram

LAB = 'model_name="m",engine="0"'


def test_a_repeated_series_is_kept_once() -> None:
    page = parse_exposition(
        "# TYPE vllm:num_requests_running gauge\n"
        f"vllm:num_requests_running{{{LAB}}} 3\n"
        f"vllm:num_requests_running{{{LAB}}} 3\n"
    )
    assert [s.value for s in page.get("vllm:num_requests_running")] == [3.0]


def test_negative_histogram_counts_are_unknown() -> None:
    page = parse_exposition(
        "# TYPE h histogram\n"
        'h_bucket{le="0.1"} -5\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 2\n'
        "h_sum -3\nh_count -2\n"
    )
    hist = read_histogram(page, "h")
    assert hist is not None
    assert hist.sum is None and hist.count is None
    assert 0.1 not in hist.bounds and all(c >= 0 for c in hist.cumulative)


def test_a_markdown_link_in_a_model_id_is_inert() -> None:
    from infmon.report.markdown import md_escape

    assert md_escape("[x](javascript:alert(1))") == "\\[x](javascript:alert(1))"
