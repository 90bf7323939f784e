"""A hostile OpenAI-compatible server (stdlib asyncio, raw HTTP/1.1): one mode per attack.

By default it behaves like a tiny vLLM (``/v1/models``, streaming ``/v1/completions`` and
``/v1/chat/completions`` with usage and ``[DONE]``, ``/metrics``, ``/version``); a mode makes
one thing hostile. The first generation request (infmon's capability probe) is always answered
normally, so the run gets going and the attack hits the measured load. ``Hostile.log`` records
every request (arrival time, path, status) and every ``Authorization`` header seen.

Run on its own: ``python -m tests.hostile.server MODE [--port N] [--tls CERT KEY]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import email.utils
import json
import re
import ssl
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.hostile import pages
from tests.hostile.pages import HOSTILE_TEXT, METRIC_TEXT, PAYLOAD

MODES = {
    "benign": "a well-behaved tiny vLLM",
    "escape-model": "model id with OSC/CSI/C1/bidi sequences (/v1/models and the metric labels)",
    "escape-text": "streamed text and finish_reason carry the payload",
    "escape-error": "every generation: HTTP 500, payload in the error body and the reason phrase",
    "escape-metrics": "/metrics labels, HELP text, cache_config labels and /version carry it",
    "drip-metrics": "/metrics answers one byte a second",
    "endless-metrics": "/metrics never ends (64 KiB writes as fast as the client reads)",
    "many-series": "/metrics has 200,000 series",
    "many-labels": "/metrics has one series with 256,000 labels (3 MB; the parser is quadratic)",
    "wide-labels": "/metrics: 10,000 series of 121 labels each (within every shape bound)",
    "ping-stall": "every load request: one token, then `: ping` comments every 0.5 s, for ever",
    "silent-stall": "every load request: the headers, then nothing, for ever",
    "huge-tokenize": "/tokenize answers 15 MB of token ids per call",
    "lying-tokenize": "/tokenize counts every text as 3 tokens",
    "deep-models": "/v1/models answers JSON nested 100,000 deep",
    "blank-gzip": "/metrics is 16 KiB of gzip that inflates to 16 MB of blank lines",
    "nan-metrics": "/metrics gauges and counters are NaN / +Inf",
    "counter-down": "/metrics counters go negative and down between scrapes",
    "no-metrics": "/metrics is 404",
    "sse-no-blank": "streams `data:` lines for ever, never the blank line that ends an event",
    "huge-usage": "usage.completion_tokens is 10^400 (a valid JSON integer)",
    "absurd-usage": "usage is negative, 2.2e34, or over max_tokens",
    "invalid-json": "every generation: a 200 stream whose data is not JSON, at once",
    "retry-after": "every other generation: 429 with Retry-After: 2",
    "retry-after-date": "every other generation: 503 with Retry-After as an HTTP-date 3 s ahead",
    "endless-error": "every generation: 503 whose error body never ends",
    "echo-key": "every generation: 401 quoting the Authorization header it got",
    "prom-escape": "a Prometheus API whose series labels carry the payload",
    "prom-drip": "a Prometheus API that answers one byte a second",
}
MANY_SERIES = 200_000


@dataclass
class Log:
    requests: list[tuple[float, str, str, int]] = field(default_factory=list)
    """(monotonic arrival time, method, path, status answered)."""
    auth: list[str] = field(default_factory=list)
    load: list[tuple[float, int]] = field(default_factory=list)
    """The load's own generation requests (an ``X-Request-Id`` ending in a request id ≥ 0):
    not the capability probe (id -1) nor the workload's sizing probes (no id)."""

    def generations(self) -> list[tuple[float, int]]:
        return [(t, s) for t, _, p, s in self.requests if p.endswith("completions")]


class Hostile:
    """The server's state and its request handler."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        self.mode = mode
        self.log = Log()
        self.generation_count = 0
        self.scrapes = 0
        self.tokens = 0
        self.ttft_s = 0.0
        """Wait this long before the first chunk of every stream (a test sets it)."""
        self._many: bytes | None = None

    # ------------------------------------------------------------------ plumbing
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                size = int(headers.get("content-length", "0"))
                body = await reader.readexactly(size) if size else b""
                if "authorization" in headers:
                    self.log.auth.append(headers["authorization"])
                path = target.split("?")[0]
                status = await self.route(writer, method, path, headers, body)
                now = time.monotonic()
                self.log.requests.append((now, method, path, status))
                rid = headers.get("x-request-id", "")
                if path.endswith("completions") and re.search(r"[^-]-\d+$", rid):
                    self.log.load.append((now, status))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except (ValueError, asyncio.CancelledError):  # a bad request; the server stopping
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    def head(status: int, reason: str, headers: dict[str, str]) -> bytes:
        lines = [f"HTTP/1.1 {status} {reason}"] + [f"{k}: {v}" for k, v in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def reply(
        self,
        w: asyncio.StreamWriter,
        status: int,
        body: bytes,
        ctype: str = "application/json",
        reason: str = "OK",
        extra: dict[str, str] | None = None,
    ) -> int:
        headers = {"Content-Type": ctype, "Content-Length": str(len(body)), **(extra or {})}
        w.write(self.head(status, reason, headers) + body)
        return status

    async def chunked(
        self, w: asyncio.StreamWriter, status: int, parts: AsyncIterator[bytes], ctype: str
    ) -> int:
        headers = {"Content-Type": ctype, "Transfer-Encoding": "chunked"}
        w.write(self.head(status, "OK", headers))
        async for part in parts:
            w.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            await w.drain()
        w.write(b"0\r\n\r\n")
        return status

    # ------------------------------------------------------------------ routes
    async def route(
        self, w: asyncio.StreamWriter, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> int:
        if path == "/v1/models" and self.mode == "deep-models":
            return self.reply(w, 200, b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        if path == "/v1/models":
            model = HOSTILE_TEXT if self.mode == "escape-model" else "tiny"
            return self.reply(
                w, 200, json.dumps({"data": [{"id": model, "max_model_len": 2048}]}).encode()
            )
        if path == "/version":
            version = METRIC_TEXT if self.mode == "escape-metrics" else "0.9.2"
            return self.reply(w, 200, json.dumps({"version": version}).encode())
        if path == "/metrics":
            return await self.metrics(w)
        if path == "/api/v1/query":
            return await self.prometheus(w)
        if path in ("/tokenize", "/detokenize") and self.mode.endswith("-tokenize"):
            return self.reply(w, 200, pages.tokenize_answer(self.mode, path))
        if path.endswith("completions") and method == "POST":
            return await self.generate(w, json.loads(body or b"{}"), headers, path)
        return self.reply(w, 404, b'{"detail": "Not Found"}')

    async def metrics(self, w: asyncio.StreamWriter) -> int:
        self.scrapes += 1
        m = self.mode
        if m == "no-metrics":
            return self.reply(w, 404, b'{"detail": "Not Found"}')
        if m == "drip-metrics":
            w.write(
                self.head(200, "OK", {"Content-Type": "text/plain", "Content-Length": "100000"})
            )
            for _ in range(100_000):
                w.write(b"#")
                await w.drain()
                await asyncio.sleep(1.0)
            return 200
        if m == "endless-metrics":
            return await self.chunked(w, 200, _endless_lines(), "text/plain")
        if m in ("many-labels", "wide-labels", "blank-gzip"):
            body, extra = pages.complex_page(m)
            return self.reply(w, 200, body, "text/plain", extra=extra)
        if m == "many-series":
            self._many = self._many or pages.many_series_page(MANY_SERIES)
            return self.reply(w, 200, self._many, "text/plain")
        return self.reply(w, 200, self.page(), "text/plain; version=0.0.4")

    def page(self) -> bytes:
        m, model = self.mode, METRIC_TEXT if self.mode == "escape-model" else "tiny"
        if m == "escape-metrics":
            return pages.vllm_page(
                METRIC_TEXT,
                self.tokens,
                engine=METRIC_TEXT,
                config_labels={"cache_dtype": METRIC_TEXT, "note": METRIC_TEXT + "\n"},
                help_text=METRIC_TEXT.replace("\n", " "),
            )
        if m == "nan-metrics":
            return pages.vllm_page(model, float("nan"), running="+Inf", kv="NaN")
        if m == "counter-down":
            down = self.scrapes % 2 == 0
            return pages.vllm_page(model, -5 if down else 1000, preemptions="-5")
        return pages.vllm_page(model, self.tokens)

    async def prometheus(self, w: asyncio.StreamWriter) -> int:
        if self.mode == "prom-drip":
            w.write(
                self.head(
                    200, "OK", {"Content-Type": "application/json", "Content-Length": "100000"}
                )
            )
            for _ in range(100_000):
                w.write(b" ")
                await w.drain()
                await asyncio.sleep(1.0)
            return 200
        metric = {
            "__name__": "vllm:num_requests_running",
            "pod": HOSTILE_TEXT,
            "model_name": HOSTILE_TEXT,
        }
        return self.reply(w, 200, pages.prom_answer(metric))

    async def generate(
        self, w: asyncio.StreamWriter, req: dict, headers: dict[str, str], path: str
    ) -> int:
        self.generation_count += 1
        n, m = self.generation_count, self.mode
        if n > 1:  # the capability probe always gets through
            if m == "escape-error":
                return self.reply(
                    w, 500, pages.error_body(HOSTILE_TEXT), reason=f"Oops{PAYLOAD[:20]}"
                )
            if m == "echo-key":
                quoted = "invalid API key in header: " + headers.get("authorization", "none")
                return self.reply(w, 401, pages.error_body(quoted))
            if m == "retry-after" and n % 2 == 0:
                return self.reply(w, 429, pages.error_body("slow down"), extra={"Retry-After": "2"})
            if m == "retry-after-date" and n % 2 == 0:
                when = email.utils.formatdate(time.time() + 3, usegmt=True)
                return self.reply(w, 503, pages.error_body("busy"), extra={"Retry-After": when})
            if m == "endless-error":
                return await self.chunked(w, 503, _endless_lines(), "text/plain")
            if m == "invalid-json":
                return self.reply(w, 200, b"data: {not json\n\n", "text/event-stream")
            load = re.search(r"[^-]-\d+$", headers.get("x-request-id", ""))
            if m in ("ping-stall", "silent-stall") and load:
                return await self.chunked(w, 200, _stall(req, path, m), "text/event-stream")
            if m == "sse-no-blank":
                return await self.chunked(w, 200, _no_blank_lines(), "text/event-stream")
        return await self.chunked(w, 200, self.stream(req, path, n), "text/event-stream")

    async def stream(self, req: dict, path: str, n: int) -> AsyncIterator[bytes]:
        chat = path.endswith("chat/completions")
        max_tokens = int(req.get("max_tokens") or 16)
        text = HOSTILE_TEXT if self.mode == "escape-text" and n > 1 else " tok"
        await asyncio.sleep(self.ttft_s)
        for i in range(max_tokens):
            last = i == max_tokens - 1
            finish = (
                ("stop" + PAYLOAD if self.mode == "escape-text" else "length") if last else None
            )
            yield pages.chunk(chat, text, finish)
            self.tokens += 1
            await asyncio.sleep(0.001)
        if (req.get("stream_options") or {}).get("include_usage"):
            yield pages.usage_chunk(4, self.usage(max_tokens, n))
        yield b"data: [DONE]\n\n"

    def usage(self, max_tokens: int, n: int) -> object:
        if n > 1 and self.mode == "huge-usage":
            return 10**400
        if n > 1 and self.mode == "absurd-usage":
            return (-109, 2.2e34, max_tokens * 1000)[n % 3]
        return max_tokens


async def _endless_lines() -> AsyncIterator[bytes]:
    line = b"vllm:num_requests_running 1\n" * 2300  # ~64 KiB
    while True:
        yield line
        await asyncio.sleep(0)


async def _stall(req: dict, path: str, mode: str) -> AsyncIterator[bytes]:
    if mode == "ping-stall":
        yield pages.chunk(path.endswith("chat/completions"), " tok", None)
    while True:
        await asyncio.sleep(0.5)
        if mode == "ping-stall":
            yield b": ping\n\n"


async def _no_blank_lines() -> AsyncIterator[bytes]:
    line = b"data: " + b"x" * 1000 + b"\n"
    while True:
        yield line * 64
        await asyncio.sleep(0)


@contextlib.contextmanager
def serve(
    mode: str, tls: ssl.SSLContext | None = None, port: int = 0
) -> Iterator[tuple[str, Hostile]]:
    """Run a ``Hostile(mode)`` on a free loopback port in a thread; yield (base URL, server)."""
    server = Hostile(mode)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, Any] = {}

    async def main() -> None:
        srv = await asyncio.start_server(server.handle, "127.0.0.1", port, ssl=tls, limit=1 << 20)
        box["port"], box["stop"] = srv.sockets[0].getsockname()[1], asyncio.Event()
        started.set()
        await box["stop"].wait()
        srv.close()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in handlers:
            t.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("hostile server did not start")
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{box['port']}", server
    finally:
        loop.call_soon_threadsafe(box["stop"].set)
        thread.join(timeout=10)
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = parser.parse_args()
    ctx = None
    if args.tls:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(*args.tls)
    with serve(args.mode, ctx, args.port) as (url, _):
        print(f"hostile ({args.mode}) on {url}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
