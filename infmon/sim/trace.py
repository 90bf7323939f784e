"""``--trace-timing FILE``: when the server wrote each chunk of each request (timing truth).

One JSON line per finished request: the server's id, the client's ``X-Request-Id`` (if sent), the
outcome, token counts, and ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux, the same clock a
client on this machine reads with ``perf_counter``) when the request was parsed and when each
chunk was handed to the socket.
"""

from __future__ import annotations

import json
from pathlib import Path


class TimingTrace:
    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the server's life)

    def write(self, stream, outcome: str | None) -> None:
        seq = stream.seq
        row = {
            "id": stream.id,
            "client_request_id": stream.spec.client_request_id,
            "outcome": outcome,
            "stream": stream.spec.stream,
            "prompt_tokens": stream.spec.prompt_tokens,
            "completion_tokens": 0 if seq is None else seq.output_len,
            "received_s": stream.received_s,
            "chunks_s": stream.trace,
        }
        self._file.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
