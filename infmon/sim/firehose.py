"""``infmon sim --firehose``: OpenAI-shaped streams with no engine, as fast as the socket takes
them, for measuring a load client's own ceiling.

Every completion streams ``max_tokens`` (default 16; chat: 256) chunks of one token each, built
once per request from a pre-rendered chunk, then the usage chunk (when asked) and ``[DONE]``,
written at once: the kernel's socket buffer and the client's reads set the pace. ``/v1/models``
and ``/health`` answer as the simulator's do.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time

from infmon.sim.http import Connection, Request

TOKEN = " the"
DONE = b"data: [DONE]\n\n"


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


class Firehose:
    def __init__(self, model: str) -> None:
        self.model = model
        self.created = int(time.time())
        self._ids = itertools.count()

    def handle(self, req: Request, conn: Connection) -> None:
        if req.method == "GET" and req.path == "/v1/models":
            card = {
                "id": self.model,
                "object": "model",
                "created": self.created,
                "owned_by": "vllm",
            }
            conn.send_json(200, {"object": "list", "data": [card]})
        elif req.method == "GET" and req.path == "/health":
            conn.send(200, b"", "application/json")
        elif req.method == "POST" and req.path in ("/v1/completions", "/v1/chat/completions"):
            self._complete(req, conn, req.path.endswith("/chat/completions"))
        else:
            conn.send_json(404, {"detail": "Not Found"})

    def _complete(self, req: Request, conn: Connection, chat: bool) -> None:
        try:
            body = json.loads(req.body or b"{}")
            n = int(
                body.get("max_completion_tokens") or body.get("max_tokens") or (256 if chat else 16)
            )
        except (ValueError, TypeError, AttributeError):
            conn.send_json(400, {"error": {"message": "invalid body", "code": 400}})
            return
        n = max(1, min(n, 1_000_000))
        rid = f"{'chatcmpl' if chat else 'cmpl'}-fh{next(self._ids):x}"
        obj = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": obj, "created": self.created, "model": self.model}
        usage = {"prompt_tokens": 1, "total_tokens": 1 + n, "completion_tokens": n}
        if not body.get("stream"):
            self._whole(conn, head, chat, n, usage)
            return

        def choice(text: str, finish: str | None) -> dict[str, object]:
            if chat:
                return {"index": 0, "delta": {"content": text}, "finish_reason": finish}
            return {"index": 0, "text": text, "finish_reason": finish}

        one = b"data: " + _dumps({**head, "choices": [choice(TOKEN, None)]}) + b"\n\n"
        parts = []
        if chat:
            role = {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
            }
            parts.append(b"data: " + _dumps({**head, "choices": [role]}) + b"\n\n")
        parts.append(one * (n - 1))
        parts.append(b"data: " + _dumps({**head, "choices": [choice(TOKEN, "length")]}) + b"\n\n")
        if (body.get("stream_options") or {}).get("include_usage"):
            parts.append(b"data: " + _dumps({**head, "choices": [], "usage": usage}) + b"\n\n")
        parts.append(DONE)
        conn.start_stream(200, "text/event-stream; charset=utf-8", {"cache-control": "no-cache"})
        conn.end_stream(b"".join(parts))

    def _whole(
        self, conn: Connection, head: dict[str, object], chat: bool, n: int, usage: object
    ) -> None:
        text = TOKEN * n
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        obj = "chat.completion" if chat else "text_completion"
        body = {**head, "object": obj, "choices": [{**choice, "finish_reason": "length"}]}
        conn.send_json(200, {**body, "usage": usage})


async def serve_firehose(host: str, port: int, model: str) -> None:
    """Serve until cancelled (SIGINT/SIGTERM end ``asyncio.run``)."""
    app = Firehose(model)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: Connection(app.handle, lambda conn: None), host, port, backlog=4096
    )
    bound = server.sockets[0].getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"infmon sim --firehose: model {model}", flush=True)
    print(f"infmon sim: listening on http://{shown}:{bound}", flush=True)
    stop = asyncio.Event()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
