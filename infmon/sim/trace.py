"""``--trace-timing FILE``: when the server wrote each chunk of each request (timing truth).

One JSON line per finished request: the server's id, the client's ``X-Request-Id`` (if sent), the
outcome, token counts, and ``time.perf_counter()`` (CLOCK_MONOTONIC on Linux, the same clock a
client on this machine reads with ``perf_counter``) when the request was parsed and when each
chunk was handed to the socket.

The instrument must not move what it measures. Encoding a row (a float per chunk) costs ~50 µs,
and with equal output lengths a whole batch of streams finishes in the same engine step: at 256
streams, writing the rows there and then held the event loop ~13 ms, so the requests clients
sent straight after waited that long to be read (and a client that sends at once looked slower
than one that dawdles). Rows are therefore only queued when a request ends and written a little
later, ``BATCH`` at a time with the loop free to serve sockets in between; ``close`` writes the rest.
A reader of a live trace allows ~0.1 s for the last rows (``settled``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from pathlib import Path
from typing import Any

BATCH = 16
DELAY_S = 0.05


class TimingTrace:
    def __init__(self, path: str | Path) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the server's life)
        self._pending: deque[tuple[Any, ...]] = deque()
        self._scheduled = False

    def write(self, stream, outcome: str | None) -> None:
        """Queue the row of a finished stream (cheap: no encoding here)."""
        seq = stream.seq
        self._pending.append(
            (
                stream.id,
                stream.spec.client_request_id,
                outcome,
                stream.spec.stream,
                stream.spec.prompt_tokens,
                0 if seq is None else seq.output_len,
                stream.received_s,
                stream.trace,
            )
        )
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write(len(self._pending))
            return
        self._scheduled = True
        loop.call_later(DELAY_S, self._drain)

    def _drain(self) -> None:
        if self._file.closed:
            return
        self._write(BATCH)
        if self._pending:
            asyncio.get_running_loop().call_soon(self._drain)  # sockets are served in between
        else:
            self._scheduled = False

    def _write(self, n: int) -> None:
        lines = []
        for _ in range(min(n, len(self._pending))):
            rid, client_rid, outcome, stream, prompt, completion, received, chunks = (
                self._pending.popleft()
            )
            row = {
                "id": rid,
                "client_request_id": client_rid,
                "outcome": outcome,
                "stream": stream,
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "received_s": received,
                "chunks_s": chunks,
            }
            lines.append(json.dumps(row, separators=(",", ":")) + "\n")
        self._file.write("".join(lines))
        self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._write(len(self._pending))
            self._file.close()


def read_trace(path: Path) -> dict[str, tuple[float, list[float]]]:
    """A trace's rows by the client's ``X-Request-Id``: (when the request was parsed, when each
    chunk was written). Rows without a client id are skipped; call on a ``settled`` file."""
    rows: dict[str, tuple[float, list[float]]] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row.get("client_request_id"):
                rows[row["client_request_id"]] = (row["received_s"], row["chunks_s"])
    return rows


def settled(path: Path, quiet_s: float = 0.2, timeout_s: float = 5.0) -> Path:
    """Wait until a live trace file has stopped growing for ``quiet_s`` (its queued rows are out)."""
    deadline = time.monotonic() + timeout_s
    size, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now_size = path.stat().st_size if path.exists() else 0
        if now_size != size:
            size, since = now_size, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.02)
    return path
