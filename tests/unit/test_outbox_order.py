"""A worker never says "nothing in flight" before the last record is out.

A bench step limited by request count settles when every worker's window says nothing is in
flight; a record that reaches the controller after that belongs to no step. On CI's loaded
machine a real-vLLM step counted 4 of its 6 requests: the last two (concurrency 2) finished
while the outbox thread was between taking the records and reading ``inflight``. Two halves
keep the order: the driver emits a record while the request still counts as in flight, and
the outbox reads ``inflight`` before it takes the records.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from infmon.clock import MonotonicClock
from infmon.engine.outbox import Outbox
from infmon.engine.protocol import RecordLines, Window
from infmon.load.driver import LoadDriver
from infmon.load.workload.words import RandomWords
from infmon.model.records.request import RequestRecord
from tests.unit.test_driver import FakeStreamClient


def _record(rid: int) -> RequestRecord:
    return RequestRecord(
        request_id=rid, sent_s=1.0, chunk_times_s=(1.1,), end_s=1.1, output_tokens=1
    )


class _FinishingDriver:
    """A driver whose last request finishes the moment the outbox looks at ``inflight``
    (a driver emits the record, then stops counting the request): the worst interleaving of
    the load loop and the outbox thread, made deterministic."""

    sent = succeeded = 1
    failed = cancelled = 0

    def __init__(self) -> None:
        self.outbox: Outbox | None = None
        self._left = 1

    def inflight_area_s(self) -> float:
        return 0.0

    @property
    def inflight(self) -> int:
        if self._left and self.outbox is not None:
            self.outbox.add_record(_record(7))  # emitted ...
            self._left = 0  # ... then no longer in flight
        return self._left


def test_a_window_saying_idle_comes_after_every_record() -> None:
    got: list[object] = []
    box = Outbox(0, got.append, MonotonicClock().now)
    driver = _FinishingDriver()
    driver.outbox, box.driver = box, driver
    box.flush_window()
    box.drain_now()
    kinds = [type(m) for m in got]
    assert kinds == [RecordLines, Window], kinds
    window = got[-1]
    assert isinstance(window, Window) and window.inflight == 0
    assert isinstance(got[0], RecordLines) and len(got[0].lines) == 1


async def test_the_driver_emits_while_the_request_is_still_in_flight() -> None:
    seen: list[int] = []
    d: LoadDriver

    def on_record(rec: RequestRecord) -> None:
        seen.append(d.inflight)

    d = LoadDriver(
        FakeStreamClient(latency_s=0.01),
        RandomWords(prompt_tokens=4, output_tokens=(2, 2)),
        on_record,
        MonotonicClock(),
    )
    d.set_concurrency(1)
    await asyncio.sleep(0.1)
    await d.stop(cancel_inflight=False)
    assert seen and all(n >= 1 for n in seen), seen
    assert d.inflight == 0


class _Idle:
    """A driver with nothing in flight: every request has been emitted as a record."""

    sent = succeeded = 1200
    failed = cancelled = inflight = 0

    def inflight_area_s(self) -> float:
        return 0.0


async def test_a_backlog_is_sent_a_pass_at_a_time_with_a_window_after_each() -> None:
    """Issue 31: a saturated worker (records made faster than its slices encode them) took
    the whole backlog each pass and closed its window only at a pass's end: one window spanned
    8 s, reached the controller after the step had ended, and a survivor's saturation went
    unseen. A pass takes at most ``PASS_MAX`` records; each window counts those still queued as
    in flight (so one saying "nothing in flight" comes after every record), and a control
    reply still follows every record that finished before it."""
    got: list[object] = []
    box = Outbox(0, got.append, MonotonicClock().now, window_s=0.0)
    box.driver = _Idle()
    box.start()
    for i in range(1200):
        box.add_record(replace(_record(i), step=3))
    box.put("reply")
    loop = asyncio.get_running_loop()
    end = loop.time() + 10
    while "reply" not in got:
        assert loop.time() < end, "the backlog was not sent"
        await asyncio.sleep(0)
    box.close()
    sent, windows = 0, []
    for msg in got[: got.index("reply")]:
        if isinstance(msg, RecordLines):
            sent += len(msg.lines)
        elif isinstance(msg, Window):
            windows.append((sent, msg.inflight, msg.inflight_by_step))
    assert windows[:3] == [(512, 688, ((3, 688),)), (1024, 176, ((3, 176),)), (1200, 0, ())]
