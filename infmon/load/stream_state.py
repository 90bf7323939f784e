"""One stream's body as it is read: SSE events → chunk stamps, token counts, usage, failures.

Pure (no I/O): the wire hands it bytes with the time they were read (``feed``), and
``check_complete`` says whether what arrived is a whole response.
"""

from __future__ import annotations

import json
from typing import Any

from infmon.load.sse import SSEDecoder
from infmon.model.records import ErrorKind


class StreamFailure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class TokenMeter:
    """Output tokens and chunks as they arrive, across every stream of a client (a live rate
    needs tokens when they come, not when their request ends). A chunk whose token count the
    server does not say counts one; ``correct`` squares a finished stream with its usage."""

    __slots__ = ("chunks", "tokens")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.chunks = 0

    def correct(self, counted: int, usage: int | None) -> None:
        if usage is not None and 0 <= usage <= 10_000_000:
            self.tokens += usage - counted


class StreamState:
    """Accumulates one stream's chunks; plain lists, no per-chunk objects."""

    __slots__ = (
        "decoder",
        "done",
        "finish_reason",
        "meter",
        "output_tokens",
        "prompt_tokens",
        "status",
        "texts",
        "times",
        "tokens",
    )

    def __init__(self, keep_text: bool, meter: TokenMeter | None = None) -> None:
        self.meter = meter
        self.decoder = SSEDecoder()
        self.status: int | None = None
        """The response status, set by the wire as soon as the head is read."""
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.texts: list[str] | None = [] if keep_text else None
        self.done = False
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None

    def feed(self, data: bytes, read_s: float) -> None:
        """Bytes of the body as read (``h1.Sink``): every event they complete is stamped ``read_s``."""
        for ev in self.decoder.feed(data):
            self.event(ev.data, read_s)

    def finish(self, t: float) -> None:
        """End of body: what the decoder still holds (a last event without its blank line)."""
        for ev in self.decoder.finish():
            self.event(ev.data, t)

    def event(self, data: str, t: float) -> None:
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            raise StreamFailure(ErrorKind.PROTOCOL, "malformed SSE data (not JSON)") from None
        if not isinstance(obj, dict):
            raise StreamFailure(ErrorKind.PROTOCOL, "malformed SSE data (not a JSON object)")
        choices = obj.get("choices")
        if choices:
            if not isinstance(choices, list):
                raise StreamFailure(
                    ErrorKind.PROTOCOL, "malformed SSE data (choices is not a list)"
                )
            self._choice(choices[0], t)
        elif obj.get("error"):
            raise StreamFailure(ErrorKind.SERVER, "server error in stream: " + error_text(obj))
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = int_or_none(usage.get("prompt_tokens"))
            self.output_tokens = int_or_none(usage.get("completion_tokens"))

    def _choice(self, c0: Any, t: float) -> None:
        if not isinstance(c0, dict):
            raise StreamFailure(ErrorKind.PROTOCOL, "malformed SSE data (choice is not an object)")
        self.times.append(t)
        ids = c0.get("token_ids")
        n = len(ids) if isinstance(ids, list) else -1
        self.tokens.append(n)
        meter = self.meter
        if meter is not None:
            meter.chunks += 1
            meter.tokens += n if n >= 0 else 1
        if c0.get("finish_reason"):
            self.finish_reason = str(c0["finish_reason"])
        if self.texts is not None:
            delta = c0.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else c0.get("text")
            if isinstance(text, str):
                self.texts.append(text)

    def counted_tokens(self) -> int:
        """What the meter counted for this stream (one a chunk where the count is unknown)."""
        return sum(n if n >= 0 else 1 for n in self.tokens)


def int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_text(obj: Any) -> str:
    """The human part of an OpenAI/vLLM/FastAPI error body, on one line."""
    msg: Any = obj
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict):
            msg = err.get("message") or err
        elif isinstance(err, str):
            msg = err
        elif "message" in obj:
            msg = obj["message"]
        elif "detail" in obj:
            msg = obj["detail"]
    text = msg if isinstance(msg, str) else json.dumps(msg)[:300]
    return " ".join(text.split())[:300]


def check_complete(st: StreamState) -> None:
    """A stream is complete on ``[DONE]`` or a finish reason (servers that never send [DONE])."""
    if not st.done and st.finish_reason is None:
        raise StreamFailure(ErrorKind.RESET, "stream ended before the response was complete")
    if not st.times:
        raise StreamFailure(ErrorKind.PROTOCOL, "stream carried no content chunk")
