"""The worker's outbox holds its deliveries while a request waits for its first token (issue 25).

What the outbox delivers wakes the controller process; on cores shared with a busy server that
wake-up delays the first chunk's read of the requests just sent. So a tick delivers nothing while
any exchange waits for its first body byte, for at most ``HOLD_MAX_S``; and ``h1`` counts the
exchanges that wait.
"""

from __future__ import annotations

import asyncio

from infmon.clock import FakeClock
from infmon.engine.outbox import HOLD_MAX_S, Outbox
from infmon.engine.protocol import RecordLines
from infmon.load.h1 import H1Pool, H1Settings, Unanswered
from infmon.model.records.request import RequestRecord


def _record(rid: int) -> RequestRecord:
    return RequestRecord(
        request_id=rid, sent_s=1.0, chunk_times_s=(1.1,), end_s=1.1, output_tokens=1
    )


async def _until(predicate, deadline_s: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + deadline_s
    while not predicate():
        assert loop.time() < end, "timed out"
        await asyncio.sleep(0)


async def test_a_tick_holds_while_a_request_waits_then_delivers() -> None:
    clock, got, waiting = FakeClock(), [], [1]
    box = Outbox(0, got.append, clock.now, tick_s=3600.0)  # ticks driven by hand
    box.unanswered = lambda: waiting[0]
    box.start()
    box.add_record(_record(1))
    box._tick()
    clock.advance(HOLD_MAX_S / 2)
    box._tick()
    await asyncio.sleep(0)
    assert got == []  # held: a request waits for its first token
    clock.advance(HOLD_MAX_S)
    box._tick()  # held long enough: delivered anyway
    await _until(lambda: any(isinstance(m, RecordLines) for m in got))
    got.clear()
    box.add_record(_record(2))
    waiting[0] = 0
    box._tick()  # nothing waits: at once
    await _until(lambda: any(isinstance(m, RecordLines) for m in got))
    box.close()


async def test_h1_counts_an_exchange_until_its_first_body_byte() -> None:
    go = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")  # headers first, as vLLM does
        await writer.drain()
        await go.wait()
        writer.write(b"6\r\ndata: \r\n0\r\n\r\n")
        await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    count = Unanswered()
    pool = H1Pool(H1Settings(f"http://127.0.0.1:{port}", {}, 5.0, 5.0, 4, False, unanswered=count))

    class Sink:
        done, status = False, None

        def __init__(self) -> None:
            self.data = b""

        def feed(self, data: bytes, read_s: float) -> None:
            self.data += data

    sink = Sink()
    post = asyncio.ensure_future(pool.post("/v1/completions", b"{}", {}, sink))
    await _until(lambda: count.n == 1)
    await _until(lambda: sink.status == 200)  # the headers came; no body byte yet
    assert count.n == 1 and sink.data == b""
    go.set()
    await post
    assert count.n == 0 and sink.data == b"data: "
    await pool.aclose()
    server.close()
    await server.wait_closed()
