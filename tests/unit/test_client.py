"""The streaming client on scripted streams (httpx.MockTransport + FakeClock): exact timestamps."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from infmon.clock import FakeClock
from infmon.load.client import StreamingClient
from infmon.load.params import ClientError, ClientParams, ServerCapabilities
from infmon.load.workload.items import Prompt
from infmon.model.records.request import ErrorKind, RequestRecord

KEY = "sk-secret-123456"


def chunk(
    text: str = "x",
    finish: str | None = None,
    token_ids: list[int] | None = None,
    chat: bool = False,
) -> bytes:
    c: dict = {"index": 0, "finish_reason": finish}
    if chat:
        c["delta"] = {"content": text}
    else:
        c["text"] = text
    if token_ids is not None:
        c["token_ids"] = token_ids
    return b"data: " + json.dumps({"choices": [c]}).encode() + b"\n\n"


def usage(prompt: int, completion: int) -> bytes:
    return (
        b"data: "
        + json.dumps(
            {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
        ).encode()
        + b"\n\n"
    )


DONE = b"data: [DONE]\n\n"


def scripted(
    clock: FakeClock,
    script: list[tuple[float, bytes | Exception]],
    seen: list[dict] | None = None,
    status: int = 200,
) -> httpx.MockTransport:
    """Each (dt, item): advance the fake clock by dt, then deliver bytes (or raise)."""

    async def body() -> AsyncIterator[bytes]:
        for dt, item in script:
            clock.advance(dt)
            if isinstance(item, Exception):
                raise item
            yield item

    async def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(json.loads(request.content))
        if status != 200:
            return httpx.Response(status, json={"error": {"message": f"nope, key {KEY}"}})
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    return httpx.MockTransport(handler)


def make_client(clock: FakeClock, transport: httpx.AsyncBaseTransport, **kw) -> StreamingClient:
    params = ClientParams(base_url="http://test", api_key=KEY, model="m", **kw)
    c = StreamingClient(params, clock, transport=transport)
    c.capabilities = ServerCapabilities(stream_options=True, vllm_fields=True)
    return c


async def run_one(script, clock=None, **kw) -> RequestRecord:
    clock = clock or FakeClock(100.0)
    client = make_client(clock, scripted(clock, script), **kw)
    try:
        return await client.stream(1, Prompt(text="hi"), 4)
    finally:
        await client.aclose()


async def test_timestamps_usage_and_latencies_hand_computed() -> None:
    rec = await run_one(
        [
            (0.2, chunk("a")),
            (0.05, chunk("b")),
            (0.05, chunk("c")),
            (0.1, chunk("d", "length")),
            (0.0, usage(7, 4)),
            (0.0, DONE),
        ]
    )
    assert rec.ok and rec.sent_s == 100.0
    assert rec.chunk_times_s == pytest.approx((100.2, 100.25, 100.3, 100.4))
    assert rec.output_tokens == 4 and rec.prompt_tokens == 7 and rec.finish_reason == "length"
    assert rec.ttft_s == pytest.approx(0.2)
    assert rec.e2el_s == pytest.approx(0.4)
    assert rec.itl_s == pytest.approx([0.05, 0.05, 0.1])
    assert rec.tpot_s == pytest.approx((0.4 - 0.2) / 3)
    assert not rec.tokens_estimated


async def test_multi_token_chunks_without_usage_are_counted_and_flagged() -> None:
    rec = await run_one(
        [
            (0.1, chunk("ab", token_ids=[1, 2])),
            (0.2, chunk("cde", token_ids=[3, 4, 5])),
            (0.1, chunk("", "stop", token_ids=[])),
            (0.0, DONE),
        ]
    )
    assert rec.ok and rec.output_tokens is None and rec.tokens_estimated
    assert rec.chunk_tokens == (2, 3, 0)
    assert rec.output_token_count == 5
    assert rec.tpot_s == pytest.approx((0.4 - 0.1) / 4)
    assert rec.itl_s == pytest.approx([0.2, 0.1])


async def test_one_read_holding_several_events_shares_one_timestamp() -> None:
    rec = await run_one(
        [(0.1, chunk("a") + chunk("b")), (0.1, chunk("c", "length") + usage(1, 3) + DONE)]
    )
    assert rec.chunk_times_s == pytest.approx((100.1, 100.1, 100.2))


async def test_strict_server_without_done_but_finish_reason_is_ok() -> None:
    body = json.dumps(
        {
            "choices": [{"text": "z", "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 2, "completion_tokens": 2},
        }
    ).encode()
    rec = await run_one([(0.1, chunk("y")), (0.1, b"data: " + body + b"\n\n")])
    assert rec.ok and rec.output_tokens == 2 and rec.finish_reason == "stop"


async def test_stream_ending_early_is_a_reset() -> None:
    rec = await run_one([(0.1, chunk("a")), (0.1, chunk("b"))])
    assert rec.error_kind == ErrorKind.RESET
    assert len(rec.chunk_times_s) == 2


async def test_connection_dropped_mid_stream_is_a_reset_record() -> None:
    rec = await run_one(
        [(0.1, chunk("a")), (0.1, httpx.RemoteProtocolError("peer closed connection"))]
    )
    assert rec.error_kind == ErrorKind.RESET and "mid-stream" in (rec.error_message or "")


async def test_read_stall_is_a_timeout_record() -> None:
    rec = await run_one(
        [(0.1, chunk("a")), (5.0, httpx.ReadTimeout("timed out"))], read_timeout_s=5.0
    )
    assert rec.error_kind == ErrorKind.TIMEOUT and "5s" in (rec.error_message or "")


async def test_malformed_json_is_a_protocol_error() -> None:
    rec = await run_one([(0.1, chunk("a")), (0.1, b"data: {oops\n\n")])
    assert rec.error_kind == ErrorKind.PROTOCOL


async def test_error_event_in_stream_is_a_server_error() -> None:
    rec = await run_one([(0.1, b'data: {"error": {"message": "engine died"}}\n\n')])
    assert rec.error_kind == ErrorKind.SERVER and "engine died" in (rec.error_message or "")


@pytest.mark.parametrize("status", [401, 404, 500])
async def test_http_errors_are_records_and_the_key_is_scrubbed(status: int) -> None:
    clock = FakeClock()
    client = make_client(clock, scripted(clock, [], status=status))
    rec = await client.stream(3, Prompt(text="hi"), 4)
    await client.aclose()
    assert rec.error_kind == ErrorKind.HTTP and rec.http_status == status
    assert f"HTTP {status}" in (rec.error_message or "")
    assert KEY not in (rec.error_message or "") and "<redacted>" in (rec.error_message or "")


async def test_body_fields_follow_capabilities_and_endpoint() -> None:
    clock = FakeClock()
    seen: list[dict] = []
    script = [(0.1, chunk("a", "length", chat=True)), (0.0, DONE)]
    client = make_client(clock, scripted(clock, script, seen), endpoint="chat")
    await client.stream(1, Prompt(text="hello"), 9)
    client.capabilities = ServerCapabilities(stream_options=True, vllm_fields=False)
    await client.stream(2, Prompt(text="hello"), 9, keep_text=True)
    await client.aclose()
    assert seen[0]["messages"] == [{"role": "user", "content": "hello"}]
    assert (
        seen[0]["ignore_eos"] is True and seen[0]["min_tokens"] == 9 and seen[0]["max_tokens"] == 9
    )
    assert "ignore_eos" not in seen[1] and "min_tokens" not in seen[1]
    assert seen[1]["stream_options"] == {"include_usage": True}


async def test_capability_probe_drops_fields_a_strict_server_rejects() -> None:
    bodies: list[dict] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        bodies.append(body)
        if "ignore_eos" in body or "min_tokens" in body:
            return httpx.Response(422, json={"detail": [{"msg": "extra fields not permitted"}]})
        return httpx.Response(200, content=chunk("a", "length"))

    client = StreamingClient(
        ClientParams(base_url="http://t", model="m"),
        FakeClock(),
        transport=httpx.MockTransport(handler),
    )
    caps = await client.detect_capabilities()
    rec = await client.stream(1, Prompt(text="x"), 5)
    await client.aclose()
    assert caps == ServerCapabilities(stream_options=True, vllm_fields=False)
    assert rec.ok and "ignore_eos" not in bodies[-1]


async def test_probe_failure_raises_one_clear_error() -> None:
    clock = FakeClock()
    client = StreamingClient(
        ClientParams(base_url="http://t", model="m", api_key=KEY),
        clock,
        transport=scripted(clock, [], status=500),
    )
    with pytest.raises(ClientError, match="HTTP 500") as info:
        await client.detect_capabilities()
    await client.aclose()
    assert KEY not in str(info.value)


async def test_list_and_resolve_models() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers.get("authorization") in (f"Bearer {KEY}", None)
        return httpx.Response(200, json={"data": [{"id": "a"}, {"id": "b"}]})

    t = httpx.MockTransport(handler)
    client = StreamingClient(
        ClientParams(base_url="http://t", api_key=KEY), FakeClock(), transport=t
    )
    assert await client.resolve_model() == "a"
    await client.aclose()
    client = StreamingClient(
        ClientParams(base_url="http://t", model="zzz"), FakeClock(), transport=t
    )
    with pytest.raises(ClientError, match="'zzz' is not served here"):
        await client.resolve_model()
    await client.aclose()


async def test_empty_model_list_trusts_the_given_model() -> None:
    t = httpx.MockTransport(
        lambda request: httpx.Response(200, json={"object": "list", "data": []})
    )
    client = StreamingClient(
        ClientParams(base_url="http://t", model="tiny"), FakeClock(), transport=t
    )
    assert await client.resolve_model() == "tiny"
    await client.aclose()
    client = StreamingClient(ClientParams(base_url="http://t"), FakeClock(), transport=t)
    with pytest.raises(ClientError, match="serves no models"):
        await client.resolve_model()
    await client.aclose()


async def test_unreachable_server_is_a_clear_error() -> None:
    client = StreamingClient(
        ClientParams(base_url="http://127.0.0.1:1", connect_timeout_s=2), FakeClock()
    )
    with pytest.raises(ClientError, match="cannot connect") as info:
        await client.list_models()
    await client.aclose()
    assert info.value.kind == ErrorKind.CONNECT


async def test_cancelled_stream_yields_a_cancelled_record() -> None:
    clock = FakeClock()
    gate = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield chunk("a")
        await gate.wait()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body())

    client = make_client(clock, httpx.MockTransport(handler))
    got: list[RequestRecord] = []
    task = asyncio.ensure_future(
        client.stream(5, Prompt(text="x"), 4, step=3, concurrency=16, on_cancel=got.append)
    )
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await client.aclose()
    assert got and got[0].error_kind == ErrorKind.CANCELLED and len(got[0].chunk_times_s) == 1
    assert (got[0].step, got[0].concurrency) == (3, 16), (
        "a cancelled record keeps its step's labels"
    )


def test_client_limits_and_timeouts_are_explicit() -> None:
    c = StreamingClient(
        ClientParams(
            base_url="http://t", max_connections=300, read_timeout_s=42.0, connect_timeout_s=3.0
        )
    )
    timeout: httpx.Timeout = c._http.timeout
    assert timeout.read == 42.0 and timeout.connect == 3.0 and timeout.pool is None
    pool: Callable = c._http._transport._pool  # type: ignore[attr-defined]
    assert pool._max_connections == 300
    asyncio.run(c.aclose())
    assert math.isfinite(timeout.read)


async def test_plain_text_and_message_prompts_are_accepted() -> None:
    clock = FakeClock()
    seen: list[dict] = []
    script = [(0.1, chunk("a", "length")), (0.0, DONE)]
    client = make_client(clock, scripted(clock, script, seen), endpoint="chat")
    await client.stream(1, "plain", 3, extra_body={"temperature": 0})
    await client.stream(
        2, [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], 3
    )
    await client.aclose()
    assert (
        seen[0]["messages"] == [{"role": "user", "content": "plain"}]
        and seen[0]["temperature"] == 0
    )
    assert seen[1]["messages"][0] == {"role": "system", "content": "s"}
