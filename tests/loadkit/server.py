"""A small scripted OpenAI-style streaming server for the load tests (real HTTP, loopback).

Behaviour is chosen per instance: a vLLM-like server (accepts ``ignore_eos``, sends usage and
``[DONE]``), a strict one (422 on vLLM-only fields, usage on the finish chunk, no ``[DONE]``),
or a faulty one (HTTP status, stream closed mid-way, malformed SSE).
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

VLLM_ONLY = ("ignore_eos", "min_tokens", "max_completion_tokens")


@dataclass
class Behaviour:
    model: str = "fake-model"
    strict: bool = False
    ttft_s: float = 0.02
    itl_s: float = 0.005
    tokens_per_chunk: int = 1
    status: int | None = None
    """Answer every generation request with this HTTP status."""
    close_after_chunks: int | None = None
    """Drop the connection after this many content chunks (every other request when odd_only)."""
    close_odd_only: bool = False
    malformed: bool = False
    stall_after_chunks: int | None = None
    """Go silent for ``stall_s`` after this many chunks (every other request)."""
    stall_s: float = 0.0
    serialize: bool = False
    """Serve one generation at a time (like transformers serve)."""
    started: int = 0
    """Load streams begun so far (an ``X-Request-Id`` ending in a request id ≥ 0: infmon's
    probes, ``…--1`` or none, are not counted); a test polls it."""


async def _read_body(receive) -> bytes:
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            return body


async def _send_json(send, status: int, obj: object) -> None:
    data = json.dumps(obj).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def make_app(b: Behaviour):
    """A raw ASGI app (uvicorn is a runtime dependency; no web framework needed)."""
    lock = asyncio.Lock()
    counter = {"n": 0}

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/v1/models" and method == "GET":
            if b.status == 401:
                return await _send_json(send, 401, {"error": {"message": "bad key"}})
            return await _send_json(
                send, 200, {"object": "list", "data": [{"id": b.model, "object": "model"}]}
            )
        if path not in ("/v1/completions", "/v1/chat/completions") or method != "POST":
            return await _send_json(send, 404, {"detail": "Not Found"})
        body = json.loads(await _read_body(receive))
        if b.status:
            return await _send_json(send, b.status, {"error": {"message": f"scripted {b.status}"}})
        if b.strict and any(k in body for k in VLLM_ONLY):
            return await _send_json(send, 422, {"detail": [{"msg": "extra fields not permitted"}]})
        if body.get("model") != b.model:
            return await _send_json(send, 404, {"error": {"message": "model not found"}})
        counter["n"] += 1
        if re.search(rb"[^-]-\d+$", dict(scope["headers"]).get(b"x-request-id", b"")):
            b.started += 1
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        async for part in _stream(b, body, path.endswith("chat/completions"), counter["n"], lock):
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def _chunk(chat: bool, text: str, finish: str | None, usage: dict | None = None) -> bytes:
    choice = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    obj = {"id": "x", "choices": [choice]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _stream(b: Behaviour, body: dict, chat: bool, n: int, lock: asyncio.Lock):
    if b.serialize:
        await lock.acquire()
    try:
        max_tokens = int(body.get("max_tokens") or 16)
        prompt_tokens = len(str(body.get("prompt") or body.get("messages")).split())
        want_usage = b.strict or (body.get("stream_options") or {}).get("include_usage")
        await asyncio.sleep(b.ttft_s)
        sent = 0
        chunks = 0
        while sent < max_tokens:
            k = min(b.tokens_per_chunk, max_tokens - sent)
            sent += k
            chunks += 1
            last = sent >= max_tokens
            if b.malformed and chunks == 2:
                yield b"data: {not json\n\n"
                return
            if (
                b.close_after_chunks is not None
                and chunks > b.close_after_chunks
                and (not b.close_odd_only or n % 2 == 1)
            ):
                raise ConnectionResetError("scripted mid-stream close")
            if b.stall_after_chunks == chunks and n % 2 == 1:
                await asyncio.sleep(b.stall_s)
            usage = (
                {"prompt_tokens": prompt_tokens, "completion_tokens": sent}
                if b.strict and last
                else None
            )
            yield _chunk(chat, " tok" * k, "length" if last else None, usage)
            if not last:
                await asyncio.sleep(b.itl_s)
        if want_usage and not b.strict:
            u = {"prompt_tokens": prompt_tokens, "completion_tokens": sent}
            yield b"data: " + json.dumps({"id": "x", "choices": [], "usage": u}).encode() + b"\n\n"
        if not b.strict:
            yield b"data: [DONE]\n\n"
    finally:
        if b.serialize:
            lock.release()


@contextmanager
def serve(behaviour: Behaviour | None = None) -> Iterator[str]:
    """Run the app on a free loopback port in a thread; yield its base URL."""
    config = uvicorn.Config(
        make_app(behaviour or Behaviour()),
        host="127.0.0.1",
        port=0,
        log_level="critical",
        lifespan="off",
        loop="asyncio",
        timeout_graceful_shutdown=0.5,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not (server.started and server.servers):
        if time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_subprocess(*args: str) -> Iterator[str]:
    """Run this server in its own process (no GIL shared with the client under test)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.loadkit.server", *args],
        cwd=repo,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "listening on " not in line:
            raise RuntimeError(f"test server did not start: {line!r}")
        yield line.split("listening on ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--ttft", type=float, default=0.02)
    p.add_argument("--itl", type=float, default=0.005)
    a = p.parse_args()
    with serve(Behaviour(ttft_s=a.ttft, itl_s=a.itl)) as url:
        print(f"listening on {url}", flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
