"""One stream's body as it is read: SSE events → chunk stamps, token counts, usage, failures.

Pure (no I/O): the wire hands it bytes with the time they were read (``feed``), and
``check_complete`` says whether what arrived is a whole response. Everything the server sent
is untrusted: one event is capped (``SSEEventTooLarge``), text kept for quality probes is
sanitised and bounded, and ``usage`` is believed only when possible (``settle_usage``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from infmon.load.sse import MAX_EVENT_BYTES, SSEDecoder
from infmon.model.base.sanitize import clean
from infmon.model.records.request import ErrorKind
from infmon.model.records.server_timing import ServerTiming, parse_server_metrics

MAX_USAGE_TOKENS = 10_000_000
"""``usage`` token counts outside [0, 10^7] are impossible for one request: rejected."""
MAX_KEPT_TEXT = 64 * 1024
"""Generated text kept per request (quality probes ask for 48 tokens)."""
MAX_CHUNKS_UNBOUNDED = 1_000_000
"""Content chunks one stream may carry when its ``max_tokens`` is unknown."""


def chunk_cap(max_output_tokens: int | None) -> int:
    """More content chunks than this cannot be a real answer to the request: a server that
    streams for ever fails the request instead of growing memory."""
    if max_output_tokens is None:
        return MAX_CHUNKS_UNBOUNDED
    return 4 * max(0, max_output_tokens) + 1024


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
        "max_chunks",
        "max_output_tokens",
        "meter",
        "output_tokens",
        "prompt_tokens",
        "scrub",
        "server_timing",
        "status",
        "text_chunks",
        "texts",
        "texts_chars",
        "times",
        "tokens",
        "usage_problem",
    )

    def __init__(
        self,
        keep_text: bool,
        max_event_bytes: int = MAX_EVENT_BYTES,
        max_output_tokens: int | None = None,
        meter: TokenMeter | None = None,
    ) -> None:
        self.meter = meter
        self.decoder = SSEDecoder(max_event_bytes)
        self.status: int | None = None
        """The response status, set by the wire as soon as the head is read."""
        self.times: list[float] = []
        self.tokens: list[int] = []
        self.texts: list[str] | None = [] if keep_text else None
        self.texts_chars = 0
        self.text_chunks = 0
        """Content chunks that carried text: each is at least one token."""
        self.done = False
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.output_tokens: int | None = None
        self.usage_problem: str | None = None
        """Why ``usage`` cannot be believed (set by ``event`` or ``settle_usage``)."""
        self.max_output_tokens = max_output_tokens
        """The request's ``max_tokens``: a server cannot have generated more."""
        self.max_chunks = chunk_cap(max_output_tokens)
        self.scrub: Callable[[str], str] | None = None
        """Removes secrets from server text before it is cut to length (set by the client)."""
        self.server_timing: ServerTiming | None = None
        """The server's per-request ``metrics`` object (vLLM), checked, when it sent one."""

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
        except (ValueError, RecursionError):  # a 4,300-digit number; nesting too deep
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
            raise StreamFailure(
                ErrorKind.SERVER, "server error in stream: " + error_text(obj, self.scrub)
            )
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        metrics = obj.get("metrics")
        if metrics is not None:
            self.server_timing = parse_server_metrics(metrics)

    def _usage(self, usage: dict[str, Any]) -> None:
        self.prompt_tokens = self.output_tokens = None
        for key in ("prompt_tokens", "completion_tokens"):
            value = usage.get(key)
            problem = usage_value_problem(value)
            if problem:
                self.usage_problem = f"usage.{key} {problem}"
            elif value is not None and key == "prompt_tokens":
                self.prompt_tokens = value
            elif value is not None:
                self.output_tokens = value

    def _choice(self, c0: Any, t: float) -> None:
        if not isinstance(c0, dict):
            raise StreamFailure(ErrorKind.PROTOCOL, "malformed SSE data (choice is not an object)")
        self.times.append(t)
        if len(self.times) > self.max_chunks:
            raise StreamFailure(
                ErrorKind.PROTOCOL,
                f"stream sent over {self.max_chunks:,} content chunks for "
                f"max_tokens {self.max_output_tokens}",
            )
        ids = c0.get("token_ids")
        n = len(ids) if isinstance(ids, list) else -1
        self.tokens.append(n)
        meter = self.meter
        if meter is not None:
            meter.chunks += 1
            meter.tokens += n if n >= 0 else 1
        if c0.get("finish_reason"):
            self.finish_reason = clean(c0["finish_reason"], 64)
        delta = c0.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else c0.get("text")
        if isinstance(text, str) and text:
            self.text_chunks += 1
            if self.texts is not None and self.texts_chars < MAX_KEPT_TEXT:
                self.texts.append(text)
                self.texts_chars += len(text)

    def counted_tokens(self) -> int:
        """What the meter counted for this stream (one a chunk where the count is unknown)."""
        return sum(n if n >= 0 else 1 for n in self.tokens)

    def kept_text(self) -> str | None:
        """The generated text (when kept): control characters escaped, at most 64 KiB."""
        if self.texts is None:
            return None
        return clean("".join(self.texts), MAX_KEPT_TEXT, multiline=True)

    def settle_usage(self) -> None:
        """At the end of a whole stream: believe ``usage`` only if it is possible for what
        arrived, else drop it (token counts then come from the chunks, flagged)."""
        problem = self.usage_problem or usage_consistency_problem(
            self.output_tokens, self.text_chunks, self.tokens, self.max_output_tokens
        )
        if problem:
            self.usage_problem = problem
            self.prompt_tokens = self.output_tokens = None


def usage_value_problem(value: Any) -> str | None:
    """Why one ``usage`` count is impossible (None when it is fine or absent)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        return f"is not an integer ({type(value).__name__})"
    if not 0 <= value <= MAX_USAGE_TOKENS:
        shown = f"{value:,}" if abs(value) < 10**15 else f"a {len(str(abs(value)))}-digit number"
        return f"{shown} is outside [0, {MAX_USAGE_TOKENS:,}]"
    return None


def usage_consistency_problem(
    output_tokens: int | None, text_chunks: int, chunk_tokens: list[int], max_tokens: int | None
) -> str | None:
    """Why ``completion_tokens`` cannot describe the chunks received (None when it can)."""
    if output_tokens is None:
        return None
    if max_tokens is not None and output_tokens > max_tokens:
        return f"usage.completion_tokens {output_tokens:,} is over the request's max_tokens {max_tokens:,}"
    if output_tokens < text_chunks:
        return (
            f"usage.completion_tokens {output_tokens:,} is fewer than the {text_chunks:,} "
            "chunks that carried text"
        )
    if chunk_tokens and min(chunk_tokens) >= 0 and sum(chunk_tokens) != output_tokens:
        return (
            f"usage.completion_tokens {output_tokens:,} differs from the chunks' "
            f"{sum(chunk_tokens):,} token ids"
        )
    return None


def error_text(obj: Any, scrub: Callable[[str], str] | None = None) -> str:
    """The human part of an OpenAI/vLLM/FastAPI error body, on one line, sanitised.

    ``scrub`` removes secrets before the text is cut (a key cut in half would not match)."""
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
    text = msg if isinstance(msg, str) else json.dumps(msg)[:100_000]
    text = " ".join(text[:100_000].split())
    return clean(scrub(text) if scrub else text, 300)


def check_complete(st: StreamState) -> None:
    """A stream is complete on ``[DONE]`` or a finish reason (servers that never send [DONE])."""
    if not st.done and st.finish_reason is None:
        raise StreamFailure(ErrorKind.RESET, "stream ended before the response was complete")
    if not st.times:
        raise StreamFailure(ErrorKind.PROTOCOL, "stream carried no content chunk")
