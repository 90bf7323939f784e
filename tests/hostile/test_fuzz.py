"""Fuzzing what a hostile server controls end to end through the parsers: random bytes and
valid-but-absurd JSON into the SSE decoder + stream state, random bytes and hostile pages into
the exposition parser + canonical snapshot.

Two properties: no exception escapes but the documented ones (``SSEError`` and its
``SSEEventTooLarge``, ``StreamFailure``; ``ExpositionError`` and its ``TooManySeries``), and no
output infmon keeps or shows (text, finish reason, usage, messages, metric names, labels,
models, config, version) holds a raw control, DEL, C1 or bidi character.
"""

from __future__ import annotations

import json
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infmon.load.sse import SSEError
from infmon.load.stream_state import MAX_USAGE_TOKENS, StreamFailure, StreamState, check_complete
from infmon.model.base.sanitize import is_clean
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import ExpositionError, parse_exposition

FUZZ = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NASTY = [
    "\x1b]0;t\x07", "\x1b]52;c;eA==\x07", "\x1b[2J", "\x9b31m", "\u202e", "\u2066", "\x00",
    "\x7f", "\r", "\n", "\ud800", "\x85", "ok",
]  # fmt: skip
nasty_text = st.lists(st.sampled_from(NASTY) | st.text(max_size=4), max_size=6).map("".join)
absurd_numbers = (
    st.integers(-(10**400), 10**400)
    | st.sampled_from([10**400, -(10**400), 2**63, -109, 0, 10**7, 10**7 + 1])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([2.2e34, -108.9, 1e308])
)
absurd_json = st.recursive(
    st.none() | st.booleans() | absurd_numbers | nasty_text,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(nasty_text, c, max_size=3),
    max_leaves=12,
)
choice = st.fixed_dictionaries(
    {},
    optional={
        "text": absurd_json | nasty_text,
        "delta": st.fixed_dictionaries({}, optional={"content": nasty_text | absurd_json}),
        "finish_reason": nasty_text | absurd_json,
        "token_ids": st.lists(st.integers(), max_size=3) | absurd_json,
    },
)
event = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(choice, max_size=2) | absurd_json,
        "usage": st.fixed_dictionaries(
            {},
            optional={"prompt_tokens": absurd_numbers, "completion_tokens": absurd_numbers},
        )
        | absurd_json,
        "error": absurd_json | st.fixed_dictionaries({"message": nasty_text}),
    },
)
sse_body = st.lists(
    event.map(lambda e: b"data: " + json.dumps(e).encode() + b"\n\n")
    | st.sampled_from([b"data: [DONE]\n\n", b": ping\n\n", b"data: {\n\n", b"data: x\r\n"])
    | st.binary(max_size=40),
    max_size=8,
).map(b"".join)


def _assert_stream_outputs_clean(st_: StreamState) -> None:
    for text in (st_.kept_text() or "", st_.finish_reason or "", st_.usage_problem or ""):
        assert is_clean(text, multiline=True), repr(text)
    assert "\n" not in (st_.finish_reason or "")
    for n in (st_.output_tokens, st_.prompt_tokens):
        assert n is None or 0 <= n <= MAX_USAGE_TOKENS


def _run_stream(body: bytes, cuts: list[int]) -> None:
    state = StreamState(keep_text=True, max_event_bytes=2048, max_output_tokens=16)
    points = sorted({c % (len(body) + 1) for c in cuts})
    try:
        for a, b in zip([0, *points], [*points, len(body)], strict=True):
            state.feed(body[a:b], 1.0)
        state.finish(2.0)
        check_complete(state)
        state.settle_usage()
    except (StreamFailure, SSEError) as exc:  # the documented ways a stream fails
        assert is_clean(str(exc)) and str(exc)
    _assert_stream_outputs_clean(state)


@FUZZ
@given(st.binary(max_size=600), st.lists(st.integers(min_value=0), max_size=6))
def test_random_bytes_into_the_sse_decoder_and_stream_state(body: bytes, cuts: list[int]) -> None:
    _run_stream(body, cuts)


@FUZZ
@given(sse_body, st.lists(st.integers(min_value=0), max_size=6))
def test_absurd_json_events_into_the_stream_state(body: bytes, cuts: list[int]) -> None:
    _run_stream(body, cuts)


def _label(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _line(name: str, labels: dict[str, str], value: str) -> str:
    body = ",".join(k + '="' + _label(v) + '"' for k, v in labels.items())
    return f"{name}{{{body}}} {value}"


NAMES = [
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:cache_config_info",
    "vllm:spec_decode_draft_acceptance_rate",
    "vllm:time_to_first_token_seconds_bucket",
    "sglang:num_queue_reqs",
    "DCGM_FI_DEV_GPU_UTIL",
]
LABELS = ["model_name", "engine", "le", "block_size", "num_gpu_blocks", "cache_dtype", "gpu"]
page_lines = st.tuples(
    st.sampled_from(NAMES),
    st.dictionaries(st.sampled_from(LABELS), nasty_text | absurd_numbers.map(str), max_size=3),
    absurd_numbers.map(str) | st.sampled_from(["NaN", "+Inf", "-Inf", "1e400", "-5"]),
).map(lambda t: _line(*t))
pages = st.lists(
    page_lines | st.sampled_from(["# HELP x \x1b]0;t\x07", "# TYPE x gauge"]), max_size=10
)


def _snapshot_strings(snap: object) -> list[str]:
    out: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(snap.to_dict())  # type: ignore[attr-defined]
    return out


def _assert_page_clean(data: str | bytes) -> None:
    try:
        page = parse_exposition(data, max_series=8)
    except ExpositionError as exc:
        assert is_clean(str(exc)) and str(exc)
        return
    for name in page.names:
        assert is_clean(name)
        for s in page.get(name):
            assert all(is_clean(k) and is_clean(v) for k, v in s.labels.items())
    snap = snapshot_of_page(page, timestamp_s=1.0)
    assert all(is_clean(s) for s in _snapshot_strings(snap))
    json.dumps(snap.to_dict())  # plain data (strict JSON is checked by the writer)
    for value in (snap.running, snap.kv_cache_usage, snap.preemptions_total):
        assert value is None or (math.isfinite(value) and value >= 0)


@FUZZ
@given(pages)
def test_hostile_pages_into_the_exposition_parser(lines: list[str]) -> None:
    _assert_page_clean("\n".join(lines) + "\n")


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes_into_the_exposition_parser(data: bytes) -> None:
    _assert_page_clean(data)
