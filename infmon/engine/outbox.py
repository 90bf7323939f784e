"""A load worker's one writer: a thread that turns what the load loop produced into messages.

The load loop only appends finished records to a list and bumps counters. Every
``tick_s`` this thread takes the records, encodes them in the journal's line encoding, adds
their latencies to the window's histograms, and every ``window_s`` (or at a ``Flush``) closes a
window of counters; then it hands each message to ``deliver`` (a blocking pipe write in a
worker process, a thread-safe hand-over in process). Encoding here rather than on the loop was
measured for the session journal (``infmon.journal.writer``): on the loop, a batch of streams
ending in one engine step delays the next requests' first chunks.
"""

from __future__ import annotations

import json
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

import numpy as np

from infmon.engine.protocol import RecordLines, Window
from infmon.journal.codec import encode_record
from infmon.load.stream_state import TokenMeter
from infmon.model.loghist import LogHistogram
from infmon.model.records import RequestRecord

BATCH = 512
"""Most records in one ``RecordLines`` message."""


class DriverView(Protocol):
    """What the outbox reads from the load driver (plain attributes, read under the GIL)."""

    sent: int
    succeeded: int
    failed: int
    cancelled: int
    inflight: int

    def inflight_area_s(self) -> float: ...


ENDPOINT_KEY = "ep"
"""The endpoint index a line carries with several endpoints (the journal's ``endpoint``)."""


def record_line(rec: RequestRecord, offset_s: float, endpoint: int | None = None) -> str:
    """The journal's encoding of a record, its send time put on the controller's clock."""
    d = encode_record(rec)
    if offset_s:
        d["t"] = round(d["t"] - offset_s, 6)
    if endpoint is not None:
        d[ENDPOINT_KEY] = endpoint
    return json.dumps(d, separators=(",", ":"), allow_nan=False)


class _Hists:
    __slots__ = ("e2el", "itl", "tpot", "ttft")

    def __init__(self) -> None:
        self.ttft, self.tpot, self.itl, self.e2el = (LogHistogram() for _ in range(4))

    def add(self, rec: RequestRecord) -> None:
        if not rec.ok:
            return
        self.ttft.add_one(rec.ttft_s)
        self.e2el.add_one(rec.e2el_s)
        tpot = rec.tpot_s
        if not math.isnan(tpot):
            self.tpot.add_one(tpot)
        if len(rec.chunk_times_s) > 1:
            self.itl.add(np.diff(np.asarray(rec.chunk_times_s)))


class Outbox:
    """See the module docstring. ``put`` and ``add_record`` are safe from the load loop."""

    def __init__(
        self,
        worker_id: int,
        deliver: Callable[[object], None],
        now: Callable[[], float],
        *,
        window_s: float = 0.25,
        tick_s: float = 0.05,
    ) -> None:
        self.worker_id = worker_id
        self.deliver = deliver
        self.now = now
        self.window_s, self.tick_s = window_s, tick_s
        self.offset_s = 0.0
        """Worker clock minus controller clock."""
        self.driver: DriverView | None = None
        self.meter: TokenMeter | None = None
        self.lags: Callable[[float, float], list[float]] | None = None
        self.lateness: Callable[[float, float], list[float]] | None = None
        self.backoff: Callable[[], str | None] | None = None
        self.endpoints: dict[int, int] | None = None
        """Request id → endpoint index (``SpreadClient.endpoint_of``), popped as encoded."""
        self._records: deque[RequestRecord] = deque()
        """Appended by the loop, taken by the thread (deque ends are thread-safe)."""
        self._messages: list[object] = []
        self._hists = _Hists()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._flush_window = False
        self._window_t0 = now()
        self._last = (0.0, 0.0, 0, 0, 0, 0)
        """(tokens, area, sent, finished, failed, cancelled) at the last window's close."""
        self._idle_said = True
        self._thread = threading.Thread(target=self._run, name="infmon-outbox", daemon=True)

    def start(self) -> None:
        self._window_t0 = self.now()
        self._last = self._totals()
        self._thread.start()

    # ---- from the load loop (cheap) ----------------------------------------------------------
    def add_record(self, rec: RequestRecord) -> None:
        self._records.append(rec)

    def put(self, msg: object) -> None:
        """A control reply, sent after every record that finished before it."""
        with self._lock:
            self._messages.append(msg)
        self._wake.set()

    def flush_window(self) -> None:
        """Close the window now (a step boundary)."""
        self._flush_window = True
        self._wake.set()

    def close(self, timeout_s: float = 5.0) -> None:
        """Send everything left (records, a last window), then stop the thread."""
        self._stop = True
        self._flush_window = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        else:
            self._drain()

    # ---- the thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._wake.wait(self.tick_s)
            self._wake.clear()
            stopping = self._stop
            self._drain()
            if stopping:
                return

    def _drain(self) -> None:
        # What is in flight is read before the records are taken: the driver emits a record
        # before it stops counting the request, so a window that says "nothing in flight"
        # comes after every record (a step settled on it misses none).
        d = self.driver
        inflight = (
            (d.inflight, _items(getattr(d, "inflight_by_step", None))) if d is not None else (0, ())
        )
        records = []
        while self._records:
            records.append(self._records.popleft())
        for i in range(0, len(records), BATCH):
            batch = records[i : i + BATCH]
            eps = self.endpoints
            if eps is None:
                lines = tuple(record_line(r, self.offset_s) for r in batch)
            else:
                lines = tuple(
                    record_line(r, self.offset_s, eps.pop(r.request_id, None)) for r in batch
                )
            for r in batch:
                self._hists.add(r)
            self.deliver(RecordLines(self.worker_id, lines))
        with self._lock:
            messages, self._messages = self._messages, []
        now = self.now()
        if (
            self._flush_window
            or now - self._window_t0 >= self.window_s
            or self._went_idle(inflight[0])
        ):
            self._flush_window = False
            self.deliver(self._close_window(now, *inflight))
        for msg in messages:
            self.deliver(msg)

    def _went_idle(self, inflight: int) -> bool:
        """The last request just finished: say so at once (a step waiting to settle)."""
        idle = self.driver is not None and inflight == 0
        said, self._idle_said = self._idle_said, idle
        return idle and not said

    def _totals(self) -> tuple[float, float, int, int, int, int]:
        d, m = self.driver, self.meter
        if d is None:
            return (0.0, 0.0, 0, 0, 0, 0)
        tokens = m.tokens if m is not None else 0.0
        return (tokens, d.inflight_area_s(), d.sent, d.succeeded, d.failed, d.cancelled)

    def _close_window(
        self, now: float, inflight: int, inflight_by_step: tuple[tuple[int, int], ...]
    ) -> Window:
        cur, last = self._totals(), self._last
        self._last = cur
        t0, self._window_t0 = self._window_t0, now
        hists, self._hists = self._hists, _Hists()
        lag, late = LogHistogram(), LogHistogram()
        if self.lags is not None:
            lag.add(self.lags(t0, now))
        if self.lateness is not None:
            late.add(self.lateness(t0, now))
        off = self.offset_s
        return Window(
            worker_id=self.worker_id,
            t0=t0 - off,
            t1=now - off,
            sent=cur[2] - last[2],
            finished=cur[3] - last[3],
            failed=cur[4] - last[4],
            cancelled=cur[5] - last[5],
            inflight=inflight,
            tokens=cur[0] - last[0],
            inflight_area_s=cur[1] - last[1],
            inflight_by_step=inflight_by_step,
            sent_by_step=_items(getattr(self.driver, "sent_by_step", None)),
            ttft=hists.ttft.sparse(),
            tpot=hists.tpot.sparse(),
            itl=hists.itl.sparse(),
            e2el=hists.e2el.sparse(),
            lag=lag.sparse(),
            lateness=late.sparse() if late.count else None,
            backoff=self.backoff() if self.backoff is not None else None,
        )


def _items(counter: dict[int, int] | None) -> tuple[tuple[int, int], ...]:
    if not counter:
        return ()
    return tuple(sorted((int(k), int(v)) for k, v in list(counter.items())))
