"""What a hostile server sends, unit by unit: usage, oversized events, error bodies quoting the
key, Retry-After, bounded reads, series caps and label sanitising, size options."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from infmon.clock import FakeClock
from infmon.config import build_config
from infmon.config_values import ConfigError, parse_size_bytes
from infmon.load.stream_state import StreamState
from infmon.load.workload.items import Prompt
from infmon.model.base.sanitize import is_clean
from infmon.model.records.request import ErrorKind
from infmon.net import FetchTimeout, FetchTooLarge, bounded_get
from infmon.sources.canonical import snapshot_of_page
from infmon.sources.exposition import TooManySeries, parse_exposition
from tests.unit.test_client import DONE, KEY, chunk, make_client, run_one


def usage_raw(completion: str, prompt: str = "3") -> bytes:
    return (
        b'data: {"choices": [], "usage": {"prompt_tokens": '
        + prompt.encode()
        + b', "completion_tokens": '
        + completion.encode()
        + b"}}\n\n"
    )


@pytest.mark.parametrize(
    ("completion", "why"),
    [
        ("1" + "0" * 400, "a 401-digit number is outside"),
        ("-109", "-109 is outside"),
        ("2.2e34", "is not an integer (float)"),
        ("true", "is not an integer (bool)"),
        ('"4"', "is not an integer (str)"),
        ("99", "over the request's max_tokens 4"),
        ("1", "fewer than the 4 chunks that carried text"),
    ],
)
async def test_impossible_usage_is_rejected_and_tokens_come_from_chunks(
    completion: str, why: str
) -> None:
    rec = await run_one(
        [
            *((0.1, chunk(t)) for t in "abc"),
            (0.1, chunk("d", "length")),
            (0.0, usage_raw(completion)),
            (0.0, DONE),
        ]
    )
    assert rec.ok and rec.output_tokens is None and rec.prompt_tokens is None
    assert rec.usage_rejected is not None and why in rec.usage_rejected, rec.usage_rejected
    assert rec.tokens_estimated and rec.output_token_count == 4
    assert rec.tpot_s == pytest.approx(0.3 / 3)


async def test_possible_usage_is_believed() -> None:
    rec = await run_one(
        [(0.1, chunk("a")), (0.1, chunk("", "length")), (0.0, usage_raw("4")), (0.0, DONE)]
    )
    assert rec.ok and rec.output_tokens == 4 and rec.usage_rejected is None


def test_token_ids_must_add_up_to_the_usage() -> None:
    st = StreamState(False, max_output_tokens=10)
    st.event(json.dumps({"choices": [{"text": "ab", "token_ids": [1, 2]}]}), 0.0)
    st.event(json.dumps({"choices": [], "usage": {"completion_tokens": 3}}), 0.0)
    st.settle_usage()
    assert st.output_tokens is None and "token ids" in (st.usage_problem or "")


async def test_an_event_over_the_cap_fails_the_request_as_oversized_event() -> None:
    rec = await run_one(
        [(0.1, chunk("a"))] + [(0.0, b"data: " + b"x" * 500 + b"\n")] * 10, max_event_bytes=2000
    )
    assert rec.error_kind == ErrorKind.OVERSIZED_EVENT and "2,000 bytes" in (
        rec.error_message or ""
    )


async def test_a_stream_that_never_ends_fails_past_the_chunk_cap() -> None:
    rec = await run_one([(0.0, chunk("a") * 5000)])  # max_tokens 4 → at most 1,040 chunks
    assert rec.error_kind == ErrorKind.PROTOCOL and "content chunks" in (rec.error_message or "")


async def test_escapes_in_text_finish_reason_and_errors_come_out_escaped() -> None:
    rec = await run_one([(0.1, chunk("\x1b]0;t\x07", "stop\x1b[2J")), (0.0, DONE)])
    assert rec.finish_reason == "stop\\x1b[2J"
    clock = FakeClock(0.0)
    body = {"error": {"message": "bad \x1b]52;c;eA==\x07 key " + KEY + " " + "y" * 400}}
    t = httpx.MockTransport(lambda r: httpx.Response(500, json=body))
    client = make_client(clock, t)
    failed = await client.stream(1, Prompt(text="hi"), 4)
    await client.aclose()
    msg = failed.error_message or ""
    assert is_clean(msg) and "\\x1b]52" in msg and KEY not in msg and "<redacted>" in msg


async def test_kept_text_is_sanitised() -> None:
    clock = FakeClock(0.0)

    async def body() -> AsyncIterator[bytes]:
        yield chunk("a\x1b[31mb\nc", "stop") + DONE

    t = httpx.MockTransport(lambda r: httpx.Response(200, content=body()))
    client = make_client(clock, t)
    rec = await client.stream(1, Prompt(text="hi"), 4, keep_text=True)
    await client.aclose()
    assert rec.output_text == "a\\x1b[31mb\nc"


@pytest.mark.parametrize(("status", "carried"), [(429, 2.0), (503, 2.0), (500, None)])
async def test_retry_after_rides_on_refused_records(status: int, carried: float | None) -> None:
    clock = FakeClock(0.0)
    t = httpx.MockTransport(
        lambda r: httpx.Response(status, headers={"Retry-After": "2"}, json={"error": "busy"})
    )
    client = make_client(clock, t)
    rec = await client.stream(1, Prompt(text="hi"), 4)
    await client.aclose()
    assert rec.http_status == status and rec.retry_after_s == carried


async def test_model_ids_are_sanitised() -> None:
    t = httpx.MockTransport(lambda r: httpx.Response(200, json={"data": [{"id": "m\x1b]0;x\x07"}]}))
    client = make_client(FakeClock(0.0), t)
    assert await client.list_models() == ["m\\x1b]0;x\\x07"]
    await client.aclose()


async def test_bounded_get_caps_size_and_time() -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b"x" * 65536
            await asyncio.sleep(0)

    async def drip() -> AsyncIterator[bytes]:
        while True:
            yield b"x"
            await asyncio.sleep(0.05)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/big":
            return httpx.Response(200, headers={"content-length": str(10**12)}, content=b"")
        return httpx.Response(200, content=endless() if request.url.path == "/endless" else drip())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        with pytest.raises(FetchTooLarge, match="over 1 MiB"):
            await bounded_get(http, "http://t/endless", max_bytes=1 << 20, deadline_s=10)
        with pytest.raises(FetchTooLarge):
            await bounded_get(http, "http://t/big", max_bytes=1 << 20, deadline_s=10)
        with pytest.raises(FetchTimeout, match=r"within 0\.3 s"):
            await bounded_get(http, "http://t/drip", max_bytes=1 << 20, deadline_s=0.3)


def test_series_cap_rejects_before_parsing() -> None:
    page = "".join(f'vllm:num_requests_running{{engine="{i}"}} 1\n' for i in range(50))
    with pytest.raises(TooManySeries, match="50 series, over the cap of 10"):
        parse_exposition(page, max_series=10)
    assert len(parse_exposition(page, max_series=50)) == 50
    assert len(parse_exposition("# HELP x y\n" * 20 + "x 1\n", max_series=5)) == 1


def test_labels_names_and_help_are_sanitised_on_the_slow_path_only_when_needed() -> None:
    hostile = 'vllm:num_requests_running{model_name="a\x1b]0;t\x07",engine="e\\nf"} 1\n'
    page = parse_exposition(hostile)
    (s,) = page.get("vllm:num_requests_running")
    assert s.labels == {"model_name": "a\\x1b]0;t\\x07", "engine": "e\\x0af"}
    snap = snapshot_of_page(page)
    assert snap.models == ("a\\x1b]0;t\\x07",)
    plain = parse_exposition('vllm:num_requests_running{model_name="Qwen/Q"} 1\n')
    assert plain.get("vllm:num_requests_running")[0].labels == {"model_name": "Qwen/Q"}


def test_impossible_config_labels_and_counters_are_unknown() -> None:
    page = parse_exposition(
        'vllm:cache_config_info{block_size="1e400",num_gpu_blocks="1e300"} 1\n'
        "vllm:num_preemptions_total -5\n"
        "vllm:spec_decode_draft_acceptance_rate NaN\n"
        "vllm:gpu_prefix_cache_hit_rate NaN\n"
    )
    snap = snapshot_of_page(page)
    assert snap.kv_capacity_tokens is None and snap.kv_block_size_tokens is None
    assert snap.preemptions_total is None and snap.prefix_cache_hit_rate is None


def test_size_options() -> None:
    assert parse_size_bytes("16MB") == parse_size_bytes("16MiB") == 16 << 20
    assert parse_size_bytes("512k") == 512 << 10 and parse_size_bytes(1000) == 1000
    for bad in ("", "1.5MB", "-1", "0", "12 parsecs"):
        with pytest.raises(ConfigError):
            parse_size_bytes(bad)
    env = {"INFMON_MAX_EVENT_BYTES": "64KiB", "INFMON_METRICS_MAX_SERIES": "5000"}
    c = build_config({"metrics_timeout": "2s", "metrics_max_bytes": "1MB"}, environ=env)
    assert (c.max_event_bytes, c.metrics_max_series) == (64 << 10, 5000)
    assert (c.metrics_timeout_s, c.metrics_max_bytes) == (2.0, 1 << 20)
