"""One request's response: OpenAI/vLLM JSON and SSE shapes, written per engine step.

Streaming chunk bytes are built from a prefix and suffix fixed per request plus the JSON-escaped
text of the step's new tokens: one small ``bytes`` concatenation and one write per step.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass

from infmon.sim.engine import Sequence
from infmon.sim.http import Connection
from infmon.sim.metrics import MetricsLevel, per_request_metrics
from infmon.sim.text import Continuation
from infmon.sim.tokenizer import ID_OF

DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"cache-control": "no-cache"}


@dataclass(slots=True)
class RequestSpec:
    """What the server parsed from the body (validated)."""

    chat: bool
    stream: bool
    include_usage: bool
    prompt_tokens: int
    max_tokens: int
    answer: list[str]  # probe answer pieces (may be empty)
    continuation: Continuation  # what follows the answer
    client_request_id: str | None
    stop_at: int | None  # output length at which EOS comes; None with ignore_eos

    def piece(self, i: int) -> str:
        n = len(self.answer)
        return self.answer[i] if i < n else self.continuation.piece(i - n)

    def token_id(self, i: int) -> int:
        """The id of output token ``i`` (what an n-gram drafter is checked against)."""
        n = len(self.answer)
        return ID_OF.get(self.answer[i], 0) if i < n else self.continuation.token_id(i - n)


class Stream:
    """Turns engine emissions into response bytes on one connection."""

    __slots__ = (
        "_pre",
        "_suf",
        "conn",
        "created",
        "fault",
        "held",
        "id",
        "last_emit_s",
        "metrics_level",
        "model",
        "parts",
        "received_s",
        "seq",
        "spec",
        "trace",
    )

    def __init__(
        self, conn: Connection, spec: RequestSpec, req_id: str, model: str, created: int
    ) -> None:
        self.conn, self.spec, self.id, self.model, self.created = conn, spec, req_id, model, created
        self.seq: Sequence | None = None
        self.metrics_level: MetricsLevel | None = None
        """Set when the server was started with vLLM's per-request metrics flags."""
        self.parts: list[str] = []
        self.last_emit_s = math.nan
        self.trace: list[float] | None = None
        self.fault: tuple[str, float] | None = None
        self.held: list[tuple[bytes, bool]] | None = None
        self.received_s = time.perf_counter()
        head = json.dumps({"id": req_id}, separators=(",", ":"))[:-1]
        if spec.chat:
            self._pre = (
                f'data: {head},"object":"chat.completion.chunk","created":{created},'
                f'"model":{json.dumps(model)},"choices":[{{"index":0,"delta":{{"content":'
            )
            self._suf = '},"logprobs":null,"finish_reason":%s}]}\n\n'
        else:
            self._pre = (
                f'data: {head},"object":"text_completion","created":{created},'
                f'"model":{json.dumps(model)},"choices":[{{"index":0,"text":'
            )
            self._suf = ',"logprobs":null,"finish_reason":%s,"stop_reason":null}]}\n\n'

    def text(self, start: int, n: int) -> str:
        piece = self.spec.piece
        return "".join([piece(i) for i in range(start, start + n)])

    def headers(self) -> dict[str, str]:
        return {"x-request-id": self.spec.client_request_id or self.id}

    def role_chunk(self) -> bytes:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    def chunk(self, text: str, finish_reason: str | None) -> bytes:
        fr = "null" if finish_reason is None else f'"{finish_reason}"'
        return (self._pre + json.dumps(text) + self._suf % fr).encode()

    def usage(self) -> dict:
        seq = self.seq
        done = 0 if seq is None else seq.output_len
        return {
            "prompt_tokens": self.spec.prompt_tokens,
            "total_tokens": self.spec.prompt_tokens + done,
            "completion_tokens": done,
        }

    def _metrics(self) -> dict:
        level, seq = self.metrics_level, self.seq
        if level is None or seq is None:
            return {}
        return {"metrics": per_request_metrics(seq, level)}

    def usage_chunk(self) -> bytes:
        obj = "chat.completion.chunk" if self.spec.chat else "text_completion"
        chunk = {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": self.usage(),
            **self._metrics(),
        }
        return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"

    def write(self, data: bytes, end: bool = False) -> None:
        if self.held is not None:
            self.held.append((data, end))
            return
        self.conn.write_chunk(data)
        if self.trace is not None:
            self.trace.append(time.perf_counter())
        if end:
            self.conn.end_stream()

    def hold(self, seconds: float) -> None:
        """Stall: buffer everything for ``seconds``, then write it (the stall fault)."""
        self.held = []
        asyncio.get_running_loop().call_later(seconds, self._release)

    def _release(self) -> None:
        held, self.held = self.held or [], None
        for data, end in held:
            self.write(data, end)

    def emit(self, start: int, n: int, finish_reason: str | None) -> None:
        """New tokens ``start .. start+n`` (and the finish reason on the last step)."""
        text = self.text(start, n)
        if not self.spec.stream:
            self.parts.append(text)
            if finish_reason is not None:
                self._send_whole(finish_reason)
            return
        data = self.chunk(text, finish_reason)
        if start == 0:
            data = (self.role_chunk() if self.spec.chat else b"") + data
        if finish_reason is not None:
            data += (self.usage_chunk() if self.spec.include_usage else b"") + DONE
            self.write(data, end=True)
            return
        self.write(data)

    def _send_whole(self, finish_reason: str) -> None:
        text = "".join(self.parts)
        if self.spec.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "tool_calls": []},
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
            }
            obj = "chat.completion"
        else:
            choice = {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": finish_reason,
                "stop_reason": None,
                "prompt_logprobs": None,
            }
            obj = "text_completion"
        body = {
            "id": self.id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(),
            **self._metrics(),
        }
        self.conn.streaming = None
        self.conn.send_json(200, body, self.headers())
        if self.trace is not None:
            self.trace.append(time.perf_counter())
