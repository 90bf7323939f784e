"""One streamed request, as measured on the client: raw timestamps, derived latencies.

Definitions follow vLLM's ``vllm bench serve`` (DESIGN.md section 2): all times are
``perf_counter`` seconds; TTFT is sent → first chunk carrying ``choices``; ITL are the gaps
between successive content chunks; E2EL is sent → last chunk; TPOT is
``(E2EL - TTFT) / (output_tokens - 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from infmon.model.records.server_timing import ServerTiming


class ErrorKind:
    """The kinds a failed request is filed under (errors are data, never tracebacks)."""

    TIMEOUT = "timeout"
    CONNECT = "connect"
    RESET = "reset"
    HTTP = "http"
    PROTOCOL = "protocol"
    SERVER = "server"
    """The server reported an error inside a 200 stream."""
    CANCELLED = "cancelled"
    OVERSIZED_EVENT = "oversized_event"
    """One SSE event grew past the cap (``--max-event-bytes``, default 1 MiB)."""
    STALLED = "stalled"
    """No new token for ``--stall-timeout`` (the stream was cut; ``infmon.load.stall``)."""
    WORKER_LOST = "worker_lost"
    """In flight on a load worker that was lost (crashed, killed, its host gone)."""
    OTHER = "other"


BAD_USAGE = "bad_usage"
"""Not a failure: the server's ``usage`` was impossible (outside [0, 10^7], or inconsistent with
the chunks received), so the request's token counts come from its chunks (flagged)."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """A finished (or failed) request. Immutable; latencies are computed properties."""

    request_id: int
    sent_s: float
    """perf_counter when the request was sent."""
    chunk_times_s: tuple[float, ...] = ()
    """perf_counter of every content chunk (the first is the TTFT chunk)."""
    end_s: float = math.nan
    """perf_counter when the stream ended (last byte or error)."""
    chunk_tokens: tuple[int, ...] = ()
    """Tokens carried by each content chunk, where known (empty when unknown)."""
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    """From the server's ``usage.completion_tokens``; None when the server sent no usage."""
    finish_reason: str | None = None
    http_status: int | None = None
    error_kind: str | None = None
    error_message: str | None = None
    step: int = 0
    """Index of the load step this request belongs to."""
    concurrency: int | None = None
    """Target concurrency (closed loop) when the request was sent."""
    rate: float | None = None
    """Target request rate (open loop) when the request was sent."""
    warmup: bool = False
    """Started during the step's warm-up: excluded from the step's statistics."""
    output_text: str | None = field(default=None, compare=False)
    """Generated text, kept only when asked for (quality probes, the next turn of a chat)."""
    usage_rejected: str | None = None
    """Why the server's ``usage`` was not believed (kind ``bad_usage``); None when it was."""
    retry_after_s: float | None = field(default=None, compare=False)
    """The server's ``Retry-After`` on a refused request (429/503), in seconds from its end."""
    prompt_tokens_requested: int | None = None
    """The prompt length the workload asked for (None: not sized, e.g. a dataset prompt);
    ``prompt_tokens`` is what the server counted."""
    server: ServerTiming | None = None
    """The server's own per-request figures (vLLM ``--enable-per-request-metrics``), if sent."""
    task: str | None = None
    """The workload task kind of the prompt (``summarize``, ``edit-code``, ...), where known."""

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def ttft_s(self) -> float:
        return self.chunk_times_s[0] - self.sent_s if self.chunk_times_s else math.nan

    @property
    def e2el_s(self) -> float:
        if self.chunk_times_s:
            return self.chunk_times_s[-1] - self.sent_s
        return math.nan

    @property
    def itl_s(self) -> list[float]:
        t = self.chunk_times_s
        return [t[i] - t[i - 1] for i in range(1, len(t))]

    @property
    def tokens_estimated(self) -> bool:
        """True when the output length is counted from chunks, not from ``usage``."""
        return self.output_tokens is None

    @property
    def output_token_count(self) -> int:
        """Output tokens: the server's usage when given, else the chunk-based estimate."""
        if self.output_tokens is not None:
            return self.output_tokens
        if self.chunk_tokens:
            return sum(self.chunk_tokens)
        return len(self.chunk_times_s)

    @property
    def tpot_s(self) -> float:
        n = self.output_token_count
        if n <= 1 or not self.chunk_times_s:
            return math.nan
        return (self.e2el_s - self.ttft_s) / (n - 1)
