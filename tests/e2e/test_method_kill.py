"""SIGKILL ``infmon bench`` mid-run: the report accounts for every request that had finished
more than a second before the kill (the server logs when it sent each stream's end)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.conftest import REPO, infmon_cmd

pytestmark = pytest.mark.e2e


def _app(done_at: list[float]) -> Starlette:
    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]})

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        n = int(body.get("max_tokens") or 8)

        async def stream() -> Iterator[bytes]:
            await asyncio.sleep(0.02)
            for i in range(n):
                choice = {
                    "index": 0,
                    "text": " w",
                    "finish_reason": "length" if i == n - 1 else None,
                }
                yield f"data: {json.dumps({'choices': [choice]})}\n\n".encode()
                await asyncio.sleep(0.005)
            usage = {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": n + 4}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"
            done_at.append(time.perf_counter())

        return StreamingResponse(stream(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
        ]
    )


@contextmanager
def logging_server() -> Iterator[tuple[str, list[float]]]:
    done_at: list[float] = []
    server = uvicorn.Server(
        uvicorn.Config(_app(done_at), host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", done_at
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_sigkill_mid_bench_loses_at_most_a_second(tmp_path):
    session = tmp_path / "session"
    with logging_server() as (url, done_at):
        proc = subprocess.Popen(
            infmon_cmd(
                "bench",
                url,
                "--concurrency",
                "4",
                "--step-duration",
                "60",
                "--warmup",
                "0",
                "--output-tokens",
                "8",
                "--session-dir",
                str(session),
            ),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            deadline = time.monotonic() + 30
            while len(done_at) < 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.5)
            kill_at = time.perf_counter()
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
        finished_before = sum(1 for t in done_at if t < kill_at - 1.0)
    assert finished_before >= 200
    out = subprocess.run(
        infmon_cmd("report", str(session)), cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads((session / "report.json").read_text())
    rows = (session / "requests.csv").read_text().splitlines()[1:]
    ok_rows = [r for r in rows if r.split(",")[5] == "1"]
    assert len(ok_rows) >= finished_before, (len(ok_rows), finished_before)
    assert doc["session"]["requests"] == len(rows)
    assert not doc["session"]["ended_cleanly"]
    assert any("did not end cleanly" in c for c in doc["caveats"])
