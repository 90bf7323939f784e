"""Figures while paused are the paused load's (issue 26, finding 14).

Ten seconds after a pause, nothing in flight, the throughput pane still said "out 1,259 tok/s
server 1,598 tok/s 20.8 req/s": the live rates averaged the last 10 s, reaching back into the
load before the pause. They now never reach back past the pause."""

from __future__ import annotations

from infmon.clock import FakeClock
from infmon.engine.types import RecordBatch
from tests.ui.fakes import (
    ServerFeed,
    ended,
    feeder,
    make_controller,
    new_session,
    record,
    window_of,
)


def test_three_seconds_after_a_pause_with_nothing_in_flight_the_rates_are_zero() -> None:
    clock = FakeClock(0.0)
    session = new_session(clock)
    wiring, feed = feeder(session, clock), ServerFeed()
    ctl = make_controller(session, clock, concurrency=8, paused=False)
    ctl.start()
    for sec in range(30):
        t0 = clock.now()
        clock.advance(1.0)
        recs = [ended(record(8 * sec + k, 0.0, 8, step=1), t0 + (k + 0.5) / 8) for k in range(8)]
        wiring.records(RecordBatch(0, recs))
        wiring.window(window_of(recs, t0, clock.now(), 8, 1, streams=recs))
        wiring.snapshot(feed.scrape(clock.now(), running=8, gen_per_s=500.0))
        session.snapshot(clock.now())
    before = session.snapshot(clock.now()).throughput
    assert before.client_output_tokens_per_s > 100 and before.requests_per_s > 5
    ctl.press("pause")
    for _ in range(3):  # the worker's windows and the server's scrapes: nothing moves
        t0 = clock.now()
        clock.advance(1.0)
        wiring.window(window_of([], t0, clock.now(), 0, 1))
        wiring.snapshot(feed.scrape(clock.now(), running=0, gen_per_s=0.0))
    tv = session.snapshot(clock.now()).throughput
    assert tv.client_output_tokens_per_s == 0.0
    assert tv.requests_per_s == 0.0
    assert tv.server_generation_tokens_per_s == 0.0
