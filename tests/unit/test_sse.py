"""The SSE decoder: any split of the bytes gives the same events; odd input never crashes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.load.sse import SSEDecoder, SSEEvent, SSEEventTooLarge

STREAM = (
    b": keep-alive comment\n"
    b'data: {"a": 1}\n\n'
    b"event: message\r\ndata: line one\r\ndata: line two\r\n\r\n"
    b"data:no-space\r\rdata\n\n"
    b"id: 7\nretry: 100\ndata: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent('{"a": 1}'),
    SSEEvent("line one\nline two", "message"),
    SSEEvent("no-space"),
    SSEEvent(""),
    SSEEvent("[DONE]"),
]


def decode(chunks: list[bytes]) -> list[SSEEvent]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out += d.feed(c)
    return out + d.finish()


def test_whole_stream() -> None:
    assert decode([STREAM]) == EXPECTED


def test_one_byte_at_a_time() -> None:
    assert decode([STREAM[i : i + 1] for i in range(len(STREAM))]) == EXPECTED


def test_crlf_split_between_feeds_is_one_line_end() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: x\r") == []
    assert d.feed(b"\n\r") == []
    assert d.feed(b"\n") == [SSEEvent("x")]


def test_event_without_final_blank_line_is_dispatched_at_finish() -> None:
    d = SSEDecoder()
    assert d.feed(b'data: {"x": 2}') == []
    assert d.finish() == [SSEEvent('{"x": 2}')]


def test_comments_and_unknown_fields_make_no_events() -> None:
    assert decode([b": ping\n\nfoo: bar\n\n:\n\n"]) == []


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode([b"data: \xff\xfe\n\n"]) == [SSEEvent("\ufffd\ufffd")]


def test_overlong_line_is_a_clear_error() -> None:
    d = SSEDecoder(max_event_bytes=10)
    with pytest.raises(SSEEventTooLarge, match="over 10 bytes"):
        d.feed(b"data: " + b"x" * 20)


def test_data_lines_without_a_blank_line_are_capped_as_one_event() -> None:
    """Short ``data:`` lines that never end an event hold memory: the event's total is capped."""
    d = SSEDecoder(max_event_bytes=1000)
    with pytest.raises(SSEEventTooLarge):
        for _ in range(200):
            d.feed(b"data: 0123456789\n")
    d = SSEDecoder(max_event_bytes=1000)
    for _ in range(200):  # the same lines, each event ended: no limit is reached
        assert d.feed(b"data: 0123456789\n\n") == [SSEEvent("0123456789")]


def test_a_big_read_of_whole_events_takes_the_checked_path() -> None:
    d = SSEDecoder(max_event_bytes=100)
    with pytest.raises(SSEEventTooLarge):
        d.feed(b"data: " + b"x" * 200 + b"\n\n")
    assert SSEDecoder(max_event_bytes=100).feed(b"data: a\n\n" * 50) == [SSEEvent("a")] * 50


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM)), max_size=20))
def test_any_split_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert decode(chunks) == EXPECTED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=10))
def test_arbitrary_bytes_never_raise(chunks: list[bytes]) -> None:
    events = decode(chunks)
    assert all(isinstance(e.data, str) for e in events)
