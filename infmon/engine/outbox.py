"""A load worker's one writer: it turns what the load loop produced into messages, on that loop,
in slices small enough that a chunk waiting on a socket is never held up for long.

The load loop only appends finished records to a deque and bumps counters. Every ``tick_s`` (or
at once for a control reply or a ``Flush``) a pump takes the records and the replies, encodes
the records in the journal's line encoding and adds their latencies to the window's
histograms ``SLICE`` records at a time, yielding to the loop between slices (``call_soon``: the
loop polls its sockets before the next slice), then hands the batches, the window (every
``window_s``, at a ``Flush``, or when the last request just finished) and the replies to
``deliver`` (a non-blocking pipe write in a worker process, a hand-over in process).

Why not a thread: measured on a real vLLM sharing the client's 2 busy cores
(``bench/real_truth.py``), a writer thread beside the loop adds a second Python thread on the
timing path: while it holds the GIL and the OS has preempted it (the cores are busy), a loop
thread woken by a chunk waits for the GIL until the writer runs again, a whole time slice of
the scheduler. On one thread that wait cannot happen; the slices bound what the encoding
adds to a chunk's wait (one slice, ~``SLICE`` × 40 µs).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable
from typing import Protocol

from infmon.engine.protocol import RecordLines, Window
from infmon.journal.codec import encode_record
from infmon.load.stream_state import TokenMeter
from infmon.model.base.loghist import LogHistogram
from infmon.model.records.request import RequestRecord
from infmon.model.records.window import LatencyHists

BATCH = 512
"""Most records in one ``RecordLines`` message."""
SLICE = 8
"""Records encoded in one turn of the loop before it serves its sockets again."""
HOLD_MAX_S = 0.25
"""Longest a tick holds the records and the window while requests wait for a first token."""
PASS_MAX = 512
"""Most records one pass takes. A pass ends with the window's close; a saturated loop (records
made faster than its slices encode them) once took ever more records a pass, and a window
then spanned 8 s instead of ``window_s``: the controller heard the worker's lag, CPU and
tokens seconds late, after the step had ended. Records left for the next pass count as in
flight in the window (a window saying "nothing in flight" still comes after every record)."""


class DriverView(Protocol):
    """What the outbox reads from the load driver."""

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


class _Pass:
    """One pump's work: what was in flight when it began, the records and replies it took."""

    __slots__ = ("inflight", "lines", "messages", "records")

    def __init__(
        self,
        inflight: tuple[int, tuple[tuple[int, int], ...]],
        records: list[RequestRecord],
        messages: list[object],
    ) -> None:
        self.inflight, self.records, self.messages = inflight, records, messages
        self.lines: list[str] = []


class Outbox:
    """See the module docstring. Every method runs on the load loop."""

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
        self.sched: Callable[[float, float], tuple[float, float, int]] | None = None
        """The load thread's (CPU s, run-queue wait s) over a window (``SelfCheck``)."""
        self.unanswered: Callable[[], int] = lambda: 0
        """Requests sent and waiting for their first body byte (``h1.UNANSWERED``)."""
        self.endpoints: dict[int, int] | None = None
        """Request id → endpoint index (``SpreadClient.endpoint_of``), popped as encoded."""
        self._records: deque[RequestRecord] = deque()
        self._messages: list[object] = []
        self._hists = LatencyHists()
        self._flush_window = False
        self._window_t0 = now()
        self._last = (0.0, 0.0, 0, 0, 0, 0)
        """(tokens, area, sent, finished, failed, cancelled) at the last window's close."""
        self._idle_said = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._pass: _Pass | None = None
        self._again = False
        """Something asked for a pump while one was running: another follows at once."""
        self._closed = False
        self._last_pass_s = now()

    def start(self) -> None:
        self._window_t0 = self.now()
        self._last = self._totals()
        self._loop = asyncio.get_running_loop()
        self._timer = self._loop.call_later(self.tick_s, self._tick)

    # ---- from the load loop (cheap) ----------------------------------------------------------
    def add_record(self, rec: RequestRecord) -> None:
        self._records.append(rec)

    def put(self, msg: object) -> None:
        """A control reply, sent after every record that finished before it."""
        self._messages.append(msg)
        self._soon()

    def flush_window(self) -> None:
        """Close the window now (a step boundary)."""
        self._flush_window = True
        self._soon()

    def close(self) -> None:
        """Send everything left (records, a last window) at once, then stop pumping."""
        if self._timer is not None:
            self._timer.cancel()
        self._flush_window = True
        self.drain_now()
        self._closed = True

    def drain_now(self) -> None:
        """Encode and send everything taken or waiting, in one go (at the end, and tests)."""
        later = self._take(None)
        work = self._pass
        if work is None:
            work = later
        else:  # a pass half done: it takes the rest, with what is in flight now
            work.records += later.records
            work.messages += later.messages
            work.inflight = later.inflight
        self._pass = work
        self._encode(len(work.records))
        self._send()
        self._pass = None
        self._again = False

    # ---- the pump -------------------------------------------------------------------------------
    def _soon(self) -> None:
        if self._closed or self._loop is None:
            return  # not started (``start`` arms the pump) or closed (``close`` sent it all)
        if self._pass is not None:
            self._again = True
        else:
            self._pass = self._take()
            self._loop.call_soon(self._step)

    def _tick(self) -> None:
        assert self._loop is not None
        self._timer = self._loop.call_later(self.tick_s, self._tick)
        if self._pass is None and not self._holding():
            self._pass = self._take()
            self._step()

    def _holding(self) -> bool:
        """Wait while a request waits for its first token (up to ``HOLD_MAX_S``): what this
        pass delivers wakes the controller, and on busy cores a process woken then delays the
        first chunk's read (closed loop: the requests sent as others ended are all waiting
        right after those records are made). Later, their chunks come between tokens."""
        return self.unanswered() > 0 and self.now() - self._last_pass_s < HOLD_MAX_S

    def _take(self, most: int | None = PASS_MAX) -> _Pass:
        # What is in flight is read before the records are taken: the driver emits a record
        # before it stops counting the request, so a window that says "nothing in flight"
        # comes after every record (a step settled on it misses none). Records left queued
        # (more than ``PASS_MAX``) are added to it: they have not reached the controller.
        d = self.driver
        inflight, by_step = (
            (d.inflight, dict(getattr(d, "inflight_by_step", None) or {}))
            if d is not None
            else (0, {})
        )
        queue = self._records
        records = [
            queue.popleft() for _ in range(len(queue) if most is None else min(len(queue), most))
        ]
        for rec in queue:  # left for the next pass (only when the loop fell behind)
            inflight += 1
            by_step[rec.step] = by_step.get(rec.step, 0) + 1
        messages: list[object] = []
        if queue:
            self._again = True  # the rest in the pass that follows at once
        else:  # a reply goes after every record that finished before it
            messages, self._messages = self._messages, []
        return _Pass((inflight, _items(by_step)), records, messages)

    def _step(self) -> None:
        """One slice of the current pass; the next slice after the loop has polled again."""
        work = self._pass
        if work is None or self._closed:
            return
        if len(work.lines) < len(work.records):
            self._encode(SLICE)
            assert self._loop is not None
            self._loop.call_soon(self._step)
            return
        self._send()
        self._pass = None
        if self._again:
            self._again = False
            self._soon()

    def _encode(self, n: int) -> None:
        work = self._pass
        assert work is not None
        eps = self.endpoints
        for rec in work.records[len(work.lines) : len(work.lines) + n]:
            ep = eps.pop(rec.request_id, None) if eps is not None else None
            work.lines.append(record_line(rec, self.offset_s, ep))
            self._hists.add(rec)

    def _send(self) -> None:
        work = self._pass
        assert work is not None
        self._last_pass_s = self.now()
        for i in range(0, len(work.lines), BATCH):
            self.deliver(RecordLines(self.worker_id, tuple(work.lines[i : i + BATCH])))
        now = self.now()
        if (
            self._flush_window
            or now - self._window_t0 >= self.window_s
            or self._went_idle(work.inflight[0])
        ):
            self._flush_window = False
            self.deliver(self._close_window(now, *work.inflight))
        for msg in work.messages:
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
        hists, self._hists = self._hists, LatencyHists()
        lag, late = LogHistogram(), LogHistogram()
        if self.lags is not None:
            lag.add(self.lags(t0, now))
        if self.lateness is not None:
            late.add(self.lateness(t0, now))
        cpu_s, runq_s, runs = self.sched(t0, now) if self.sched is not None else (0.0, 0.0, 0)
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
            cpu_s=cpu_s,
            runq_s=runq_s,
            runs=runs,
        )


def _items(counter: dict[int, int] | None) -> tuple[tuple[int, int], ...]:
    if not counter:
        return ()
    return tuple(sorted((int(k), int(v)) for k, v in list(counter.items())))
