"""A small scripted OpenAI-style streaming server for the load tests (real HTTP, loopback).

Behaviour is chosen per instance: a vLLM-like server (accepts ``ignore_eos``, sends usage and
``[DONE]``), a strict one (422 on vLLM-only fields, usage on the finish chunk, no ``[DONE]``),
or a faulty one (HTTP status, stream closed mid-way, malformed SSE).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

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
    serialize: bool = False
    """Serve one generation at a time (like transformers serve)."""


def make_app(b: Behaviour) -> Starlette:
    lock = asyncio.Lock()
    counter = {"n": 0}

    async def models(request: Request) -> Response:
        if b.status == 401:
            return JSONResponse({"error": {"message": "bad key"}}, status_code=401)
        return JSONResponse({"object": "list", "data": [{"id": b.model, "object": "model"}]})

    async def generate(request: Request) -> Response:
        body = await request.json()
        if b.status:
            return JSONResponse({"error": {"message": f"scripted {b.status}"}}, status_code=b.status)
        if b.strict and any(k in body for k in VLLM_ONLY):
            return JSONResponse({"detail": [{"msg": "extra fields not permitted"}]}, status_code=422)
        if body.get("model") != b.model:
            return JSONResponse({"error": {"message": "model not found"}}, status_code=404)
        counter["n"] += 1
        gen = _stream(b, body, request.url.path.endswith("chat/completions"), counter["n"], lock)
        return StreamingResponse(gen, media_type="text/event-stream")

    return Starlette(routes=[
        Route("/v1/models", models),
        Route("/v1/completions", generate, methods=["POST"]),
        Route("/v1/chat/completions", generate, methods=["POST"]),
    ])


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
            if b.close_after_chunks is not None and chunks > b.close_after_chunks and (
                not b.close_odd_only or n % 2 == 1
            ):
                raise ConnectionResetError("scripted mid-stream close")
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": sent} if b.strict and last else None
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
    config = uvicorn.Config(make_app(behaviour or Behaviour()), host="127.0.0.1", port=0,
                            log_level="critical", lifespan="off", loop="asyncio")
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
