"""The append-only session record: config, request records, scrapes, events.

Files in the session directory (all JSON Lines except ``config.json``):

- ``config.json``   schema, clock origin (perf_counter ↔ wall time), redacted configuration
- ``records.jsonl`` one compact request record per line (``infmon.journal.codec``)
- ``scrapes.jsonl`` ``{"t": perf_s, "snap": {...}}`` per server snapshot
- ``events.jsonl``  ``{"t": perf_s, "kind": ..., ...payload}`` per operator action or event
- ``quality.json``  the last quality run, when there was one

Writers append to an in-memory buffer (cheap, safe to call from the asyncio loop); a daemon
thread encodes and writes the buffer out every ``flush_interval_s`` (0.5 s by default), so a
killed process loses at most about that much. Nothing is held after it is written: memory stays
constant.

Where the encoding runs was measured (``bench/client_overhead.py``, infmon's load client pinned
to one core). On the thread it competes with the client's loop for that core: with ``--stress``
at 256 streams (~600 requests/s) the loop waited 97–105 ms per 5 s window for the core against
13–31 ms with ``--no-journal``. On the loop instead, a batch of streams that ends in one engine
step is encoded in one go while the next requests' first chunks wait: client-added TTFT median
2.25 ms at 256 streams in the default scenario, against 0.02–0.20 ms with the thread. The thread
stays, and a line costs half what it did (numpy chunk gaps, no NaN walk unless needed).
"""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any

from infmon.clock import Clock, MonotonicClock, wall_time
from infmon.journal.codec import encode_record
from infmon.journal.redact import redact
from infmon.model.records import RequestRecord

SCHEMA = "infmon.session/1"
RECORDS, SCRAPES, EVENTS = "records.jsonl", "scrapes.jsonl", "events.jsonl"
CONFIG, QUALITY = "config.json", "quality.json"
_MAX_BUFFERED = 20_000


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, Path):
        return str(obj)
    return repr(obj)


def _clean(value: Any) -> Any:
    """JSON has no NaN: missing numbers become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(obj: Any) -> str:
    """One compact JSON line (NaN → null, objects with ``to_dict`` expanded)."""
    if hasattr(obj, "to_dict") and not isinstance(obj, dict):
        obj = obj.to_dict()
    return json.dumps(_clean(obj), separators=(",", ":"), default=_json_default)


def _record_line(record: RequestRecord) -> str:
    """``dumps(encode_record(record))``, without walking the ~100-number chunk list in Python to
    look for NaN first (that walk was half the cost of a line) unless the encoder finds one."""
    d = encode_record(record)
    try:
        return json.dumps(d, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return dumps(d)


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(obj), indent=2, default=_json_default) + "\n")
    os.replace(tmp, path)


class JournalWriter:
    """Appends a session's record to ``session_dir`` as it happens; see the module docstring."""

    def __init__(
        self,
        session_dir: Path,
        clock: Clock | None = None,
        flush_interval_s: float = 0.5,
        autoflush: bool = True,
    ) -> None:
        self.session_dir = Path(session_dir)
        self.session_dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock or MonotonicClock()
        self.origin = {"perf_s": self.clock.now(), "wall_s": wall_time()}
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._buffers: dict[str, list[Any]] = {RECORDS: [], SCRAPES: [], EVENTS: []}
        self._files = {
            name: open(self.session_dir / name, "a", encoding="utf-8")  # noqa: SIM115
            for name in self._buffers
        }
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if autoflush:
            self._thread = threading.Thread(
                target=self._flush_loop,
                args=(flush_interval_s,),
                name="infmon-journal",
                daemon=True,
            )
            self._thread.start()

    def write_config(self, config: dict[str, Any]) -> None:
        """(Re)write ``config.json`` atomically, with every secret redacted."""
        write_json_atomic(
            self.session_dir / CONFIG,
            {"schema": SCHEMA, "clock_origin": self.origin, "config": redact(config)},
        )

    def write_record(self, record: RequestRecord) -> None:
        self._append(RECORDS, record)

    def write_scrape(self, snapshot: Any) -> None:
        """A ``ServerSnapshot`` (anything with ``to_dict()``) or a plain dict."""
        snap = snapshot.to_dict() if hasattr(snapshot, "to_dict") else dict(snapshot)
        snap = {k: v for k, v in snap.items() if v not in (None, {}, [], ())}
        t = snap.get("timestamp_s", snap.get("t"))
        self._append(SCRAPES, dumps({"t": t if t is not None else self.clock.now(), "snap": snap}))

    def write_event(self, kind: str, **payload: Any) -> None:
        """Operator action or notable event (mark, baseline, concurrency, step, error, …)."""
        t = payload.pop("t", None)
        line = {"t": self.clock.now() if t is None else t, "wall": wall_time(), "kind": kind}
        line.update(payload)
        self._append(EVENTS, dumps(line))

    def write_quality(self, result: dict[str, Any]) -> None:
        """Store a quality run's result (also noted as an event)."""
        write_json_atomic(self.session_dir / QUALITY, result)
        self.write_event(
            "quality",
            accuracy=result.get("accuracy"),
            agreement=result.get("agreement"),
            probes=result.get("probes"),
        )

    def _append(self, name: str, item: Any) -> None:
        with self._lock:
            if self._closed:
                raise ValueError("journal is closed")
            buf = self._buffers[name]
            buf.append(item)
            full = len(buf) >= _MAX_BUFFERED
        if full:
            self.flush()

    def flush(self) -> None:
        """Write out everything buffered so far (to the OS: survives a killed process)."""
        with self._io_lock:
            with self._lock:
                pending = {name: buf for name, buf in self._buffers.items() if buf}
                self._buffers = {name: [] for name in self._buffers}
            for name, items in pending.items():
                lines = [it if isinstance(it, str) else _record_line(it) for it in items]
                f = self._files[name]
                f.write("\n".join(lines) + "\n")
                f.flush()

    def _flush_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.flush()
            except (OSError, ValueError):
                return

    def abandon(self) -> None:
        """Stop without the ``session_end`` event, as a killed process would (for tests)."""
        self._stop.set()
        with self._io_lock, self._lock:
            self._closed = True
            for f in self._files.values():
                f.close()

    def close(self) -> None:
        """Flush everything, note ``session_end`` and close (a clean end)."""
        if self._closed:
            return
        self.write_event("session_end")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush()
        with self._io_lock, self._lock:
            self._closed = True
            for f in self._files.values():
                f.close()

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
