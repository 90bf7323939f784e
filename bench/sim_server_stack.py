"""Which HTTP stack should the simulator use? Server CPU per 1,000 SSE chunks, measured.

Runs the same streaming workload (N concurrent streams, one small SSE chunk per stream every
``--interval`` seconds, written from one ticking task as the simulator's engine does) on
(a) the simulator's own ``asyncio.Protocol`` + httptools server (``infmon.sim.http``) and
(b) uvicorn + httptools + uvloop with a minimal ASGI app, and prints server CPU seconds per
1,000 chunks for each.

    python bench/sim_server_stack.py --streams 500 --duration 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
CHUNK = (
    b'data: {"id":"cmpl-x","object":"text_completion","choices":[{"index":0,"text":" word"}]}\n\n'
)


async def serve_protocol(port: int, interval: float) -> None:
    from infmon.sim.http import Connection

    streams: set[Connection] = set()

    def handle(req, conn) -> None:
        conn.start_stream(200, "text/event-stream", None)
        streams.add(conn)

    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: Connection(handle, streams.discard), "127.0.0.1", port)
    print("ready", flush=True)
    while True:
        await asyncio.sleep(interval)
        for conn in list(streams):
            conn.write_chunk(CHUNK)


def serve_uvicorn(port: int, interval: float) -> None:
    import uvicorn

    queues: set[asyncio.Queue] = set()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(interval)
            for q in list(queues):
                q.put_nowait(CHUNK)

    async def app(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await receive()
            asyncio.get_running_loop().create_task(ticker())
            await send({"type": "lifespan.startup.complete"})
            await receive()
            return
        await receive()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        q: asyncio.Queue = asyncio.Queue()
        queues.add(q)
        try:
            while True:
                await send({"type": "http.response.body", "body": await q.get(), "more_body": True})
        finally:
            queues.discard(q)

    print("ready", flush=True)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="error",
        access_log=False,
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(port: int, pid: int, streams: int, duration: float) -> tuple[int, float]:
    count = [0]

    async def one(session) -> None:
        async with session.post(f"http://127.0.0.1:{port}/s", data=b"{}") as resp:
            async for _ in resp.content:
                count[0] += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = [asyncio.create_task(one(session)) for _ in range(streams)]
        await asyncio.sleep(2.0)
        c0, n0 = cpu_seconds(pid), count[0]
        await asyncio.sleep(duration)
        cpu, n = cpu_seconds(pid) - c0, count[0] - n0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return n // 2, cpu  # each SSE chunk is two lines (data + blank)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", type=int, default=500)
    p.add_argument("--duration", type=float, default=8.0)
    p.add_argument("--interval", type=float, default=0.03)
    p.add_argument("--serve", choices=("protocol", "uvicorn"), help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve == "protocol":
        import uvloop

        uvloop.run(serve_protocol(args.port, args.interval))
        return 0
    if args.serve == "uvicorn":
        serve_uvicorn(args.port, args.interval)
        return 0
    for i, stack in enumerate(("protocol", "uvicorn")):
        port = 18700 + os.getpid() % 500 + i
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                stack,
                "--port",
                str(port),
                "--interval",
                str(args.interval),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()
            time.sleep(1.0)
            chunks, cpu = asyncio.run(drive(port, proc.pid, args.streams, args.duration))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # uvicorn waits for open streams
                proc.kill()
                proc.wait()
        print(
            f"{stack:9} {chunks / args.duration:9.0f} chunks/s  "
            f"{1000 * cpu / max(1, chunks):.3f} server CPU s per 1,000 chunks",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
