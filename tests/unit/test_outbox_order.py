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
