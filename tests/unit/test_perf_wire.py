"""The load path on a real loopback socket: connections are reused, chunks are timestamped as they
arrive, and transport failures become records (aiohttp path; scripted httpx streams are in
test_client.py)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from infmon.load.client import StreamingClient
from infmon.load.params import ClientParams, ServerCapabilities
from infmon.load.workload.items import Prompt
from infmon.model.records.request import ErrorKind

Script = Callable[[asyncio.StreamWriter, int], Awaitable[None]]


def sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


async def stream_tokens(
    w: asyncio.StreamWriter, n: int, gap_s: float = 0.0, end: bool = True
) -> None:
    w.write(HEAD)
    for i in range(n):
        finish = "length" if i == n - 1 else None
        w.write(chunked(sse({"choices": [{"index": 0, "text": "x", "finish_reason": finish}]})))
        await w.drain()
        if gap_s:
            await asyncio.sleep(gap_s)
    w.write(chunked(sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": n}})))
    w.write(chunked(b"data: [DONE]\n\n"))
    if end:
        w.write(b"0\r\n\r\n")
    await w.drain()


@asynccontextmanager
async def server(
    script: Script, heads: list[bytes] | None = None
) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw HTTP/1.1 server: ``script(writer, request_index)`` answers each request."""
    connections: list[int] = []
    requests = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal requests
        connections.append(1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if heads is not None:
                    heads.append(head)
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                await reader.readexactly(length)
                requests += 1
                await script(writer, requests)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", connections
    finally:
        srv.close()


def client(url: str, **kw: float) -> StreamingClient:
    c = StreamingClient(ClientParams(base_url=url, model="m", **kw))  # type: ignore[arg-type]
    c.capabilities = ServerCapabilities(stream_options=True, vllm_fields=True)
    return c


async def test_sequential_streams_reuse_one_connection() -> None:
    """Regression: breaking off at [DONE] left the body unread, so every request paid a new TCP
    connection (and seven async generators finalised by the GC through the loop's self-pipe)."""
    async with server(lambda w, i: stream_tokens(w, 4)) as (url, connections):
        c = client(url)
        recs = [await c.stream(i, Prompt(text="hi"), 4) for i in range(5)]
        await c.aclose()
    assert all(r.ok and r.output_tokens == 4 and len(r.chunk_times_s) == 4 for r in recs), recs
    assert len(connections) == 1


async def test_chunks_are_timestamped_as_they_arrive_not_in_a_burst() -> None:
    gap_s = 0.05
    async with server(lambda w, i: stream_tokens(w, 5, gap_s)) as (url, _):
        c = client(url)
        rec = await c.stream(1, Prompt(text="hi"), 5)
        await c.aclose()
    assert rec.ok, rec
    assert all(g > 0.6 * gap_s for g in rec.itl_s), rec.itl_s
    assert rec.tpot_s > 0.6 * gap_s


async def test_done_without_end_of_body_still_completes() -> None:
    async def no_end(w: asyncio.StreamWriter, i: int) -> None:
        await stream_tokens(w, 2, end=False)
        await asyncio.sleep(10)

    async with server(no_end) as (url, _):
        c = client(url)
        rec = await asyncio.wait_for(c.stream(1, Prompt(text="hi"), 2), 5)
        await c.aclose()
    assert rec.ok and rec.output_tokens == 2


async def test_http_error_body_is_the_message() -> None:
    async def fail(w: asyncio.StreamWriter, i: int) -> None:
        body = json.dumps({"error": {"message": "model is sleeping"}}).encode()
        w.write(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        await w.drain()

    async with server(fail) as (url, _):
        c = client(url)
        rec = await c.stream(1, Prompt(text="hi"), 2)
        await c.aclose()
    assert rec.error_kind == ErrorKind.HTTP and rec.http_status == 503
    assert rec.error_message == "HTTP 503 from /v1/completions: model is sleeping"


async def test_connection_closed_mid_stream_is_a_reset() -> None:
    async def cut(w: asyncio.StreamWriter, i: int) -> None:
        w.write(
            HEAD + chunked(sse({"choices": [{"index": 0, "text": "x", "finish_reason": None}]}))
        )
        await w.drain()
        w.close()

    async with server(cut) as (url, _):
        c = client(url)
        rec = await c.stream(1, Prompt(text="hi"), 4)
        await c.aclose()
    assert rec.error_kind == ErrorKind.RESET and len(rec.chunk_times_s) == 1, rec


async def test_read_stall_is_a_timeout() -> None:
    async def stall(w: asyncio.StreamWriter, i: int) -> None:
        w.write(HEAD)
        await w.drain()
        await asyncio.sleep(5)

    async with server(stall) as (url, _):
        c = client(url, read_timeout_s=0.3)
        rec = await c.stream(1, Prompt(text="hi"), 4)
        await c.aclose()
    assert rec.error_kind == ErrorKind.TIMEOUT and "read timeout" in (rec.error_message or ""), rec


async def test_refused_connection_is_a_connect_record() -> None:
    async with server(lambda w, i: stream_tokens(w, 1)) as (url, _):
        pass  # closed: nothing listens on that port now
    c = client(url)
    rec = await c.stream(1, Prompt(text="hi"), 4)
    await c.aclose()
    assert rec.error_kind == ErrorKind.CONNECT, rec


async def test_every_request_carries_a_unique_request_id() -> None:
    heads: list[bytes] = []
    async with server(lambda w, i: stream_tokens(w, 1), heads) as (url, _):
        c1, c2 = client(url), client(url)
        for c in (c1, c2):
            assert (await c.stream(7, Prompt(text="hi"), 1)).ok
            await c.aclose()
    ids = [
        line.split(b":", 1)[1].strip().decode()
        for h in heads
        for line in h.split(b"\r\n")
        if line.lower().startswith(b"x-request-id")
    ]
    assert ids == [f"{c1.request_id_prefix}7", f"{c2.request_id_prefix}7"] and ids[0] != ids[1]


async def test_chunks_are_stamped_when_read_before_any_decoding(monkeypatch) -> None:
    """Each event carries the time its bytes were read from the socket, taken before they are
    parsed: decoding (slowed here to 30 ms a read) never counts as latency."""
    import infmon.load.sse as sse_mod

    slow_s, gap_s, n = 0.03, 0.1, 3
    written_s: list[float] = []

    async def paced(w: asyncio.StreamWriter, i: int) -> None:
        w.write(HEAD)
        for k in range(n):
            await asyncio.sleep(gap_s)
            w.write(
                chunked(
                    sse(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "text": "x",
                                    "finish_reason": "length" if k == n - 1 else None,
                                }
                            ]
                        }
                    )
                )
            )
            written_s.append(time.perf_counter())
        w.write(chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()

    original = sse_mod.SSEDecoder.feed

    def slow_feed(self: sse_mod.SSEDecoder, chunk: bytes) -> list[sse_mod.SSEEvent]:
        time.sleep(slow_s)
        return original(self, chunk)

    monkeypatch.setattr(sse_mod.SSEDecoder, "feed", slow_feed)
    async with server(paced) as (url, _):
        c = client(url)
        rec = await c.stream(1, Prompt(text="hi"), n)
        await c.aclose()
    assert rec.ok and len(rec.chunk_times_s) == n, rec
    late = [t - w for t, w in zip(rec.chunk_times_s, written_s, strict=True)]
    assert all(0 <= d < slow_s / 2 for d in late), late
    assert rec.end_s - written_s[-1] >= slow_s  # the decoding did take its 30 ms


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async def once(w: asyncio.StreamWriter, i: int) -> None:
        await stream_tokens(w, 2)
        w.close()  # keep-alive not honoured: the client must notice and connect again

    async with server(once) as (url, connections):
        c = client(url)
        first = await c.stream(1, Prompt(text="hi"), 2)
        await asyncio.sleep(0.05)
        second = await c.stream(2, Prompt(text="hi"), 2)
        await c.aclose()
    assert first.ok and second.ok, (first, second)
    assert len(connections) == 2


async def test_https_with_the_servers_certificate_as_ca_bundle(tmp_path) -> None:
    import shutil
    import ssl
    import subprocess

    import pytest

    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(x.split(b":")[1])
            for x in head.split(b"\r\n")
            if x.lower().startswith(b"content-length")
        )
        await reader.readexactly(length)
        await stream_tokens(writer, 3)
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    url = f"https://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    try:
        trusted = StreamingClient(ClientParams(base_url=url, model="m", ca_bundle=str(cert)))
        trusted.capabilities = ServerCapabilities(stream_options=True, vllm_fields=True)
        ok = await trusted.stream(1, Prompt(text="hi"), 3)
        await trusted.aclose()
        stranger = client(url)  # the system's CAs do not know this certificate
        refused = await stranger.stream(2, Prompt(text="hi"), 3)
        await stranger.aclose()
    finally:
        srv.close()
    assert ok.ok and len(ok.chunk_times_s) == 3, ok
    assert (
        refused.error_kind == ErrorKind.CONNECT
        and "certificate" in (refused.error_message or "").lower()
    )
