"""The live Session: live figures from the load's windows, the server from real pages, events
said once (×N), bounded memory."""

from __future__ import annotations

import math

import pytest

from infmon.clock import FakeClock
from infmon.model.live.session import Session, SessionConfig
from infmon.model.records.measures import SLO
from infmon.model.records.request import RequestRecord
from infmon.model.server.snapshot import SourceState, unavailable
from infmon.model.steps.span import CLOSED, Level
from tests.enginekit.pages import ServerFeed
from tests.ui.fakes import deliver, ended, record, window_of


def test_empty_session_snapshot_has_nan_not_zero() -> None:
    s = Session(SessionConfig(endpoint="http://x"))
    snap = s.snapshot(0.5)
    assert math.isnan(snap.throughput.client_output_tokens_per_s)
    assert math.isnan(snap.latency.ttft.p50_s)
    assert not snap.server.has_data
    assert snap.header.state == "paused" and snap.header.inflight_requests is None


def begin(s: Session, level: int, t: float) -> None:
    s.apply_steps(s.ledger.book.begin(Level(CLOSED, level), t, "operator", 1.0), t)


def test_client_tokens_count_as_they_arrive_not_when_requests_end() -> None:
    """Four long streams that end together: a completion count would read 0 then 4× — the
    chunks say the same rate every second (the 50↔100 square wave of issue 13)."""
    s = Session(SessionConfig(throughput_window_s=4, window_s=30), start_s=0.0)
    begin(s, 4, 0.0)
    s.set_paused(False, 0.0)
    streams = [ended(record(i, 0.0, 4, tokens=400), 8.0) for i in range(4)]  # end at t=8
    rates = []
    for sec in range(8):
        finished = [r for r in streams if sec <= r.end_s < sec + 1]
        s.add_window(window_of(finished, sec, sec + 1.0, inflight=4, streams=streams))
        if sec >= 5:  # the windows from 1.2 s (the first chunks) on
            rates.append(s.snapshot(sec + 1.0).throughput.client_output_tokens_per_s)
    per_stream = 1 / (0.015 + 0.0005 * 4)
    assert all(r == pytest.approx(4 * per_stream, rel=0.05) for r in rates), rates


def test_latency_percentiles_come_from_the_windows_histograms() -> None:
    s = Session(SessionConfig(window_s=30), start_s=0.0)
    recs = [record(i, 0.1 * i, 2) for i in range(50)]
    s.add_window(window_of(recs, 0.0, 10.0, inflight=2))
    lat = s.snapshot(10.0).latency
    ttfts = sorted(r.ttft_s for r in recs)
    assert lat.ttft.count == 50
    assert lat.ttft.p50_s == pytest.approx((ttfts[24] + ttfts[25]) / 2, rel=0.01)


def test_server_down_and_back_once_each() -> None:
    clock = FakeClock(0.0)
    s = Session(start_s=0.0)
    feed = ServerFeed()
    deliver(s, feed.scrape(1.0), 1.0)
    for t in (5.0, 6.0, 7.0):
        deliver(s, unavailable(t, SourceState.DOWN, "connect", "refused"), t)
    snap = s.snapshot(8.0)
    assert not snap.server.up and snap.server.down_since_s == 5.0
    assert snap.header.state == "server down"
    deliver(s, feed.scrape(clock.advance(9.0)), 9.0)
    texts = [e.text for e in s.snapshot(10.0).events]
    assert texts.count("server down: connect: refused") == 1
    assert "server back up after 4.0 s" in texts


def test_a_repeated_event_is_counted_not_repeated() -> None:
    s = Session(start_s=0.0)
    for t in range(5):
        s.add_event(float(t), "diagnosis", "queueing: 8 waiting")
    s.add_event(6.0, "load", "step 2: c=4")
    s.add_event(7.0, "diagnosis", "queueing: 8 waiting")
    events = s.snapshot(8.0).events
    assert [(e.text, e.count) for e in events] == [("step 2: c=4", 1), ("queueing: 8 waiting", 6)]


def test_max_num_seqs_is_inferred_only_from_a_capped_running_count() -> None:
    s = Session(start_s=0.0)
    feed = ServerFeed()
    for t in range(1, 4):
        deliver(s, feed.scrape(float(t), running=100, waiting=0), float(t))
    assert math.isnan(s.snapshot(4.0).server.max_num_seqs)  # never queued: unknown
    for t in range(4, 8):
        deliver(s, feed.scrape(float(t), running=256, waiting=245), float(t))
    server = s.snapshot(8.0).server
    assert server.max_num_seqs == 256 and server.max_num_seqs_inferred


def test_baseline_header_and_cancelled_are_not_failed() -> None:
    s = Session(SessionConfig(slo=SLO(ttft_s=0.5)), start_s=0.0)
    begin(s, 2, 0.0)
    s.add_record(record(1, 1.5, 2, step=1))
    s.add_record(RequestRecord(2, 2.0, (), 3.0, error_kind="cancelled", step=1))
    s.add_record(RequestRecord(3, 2.0, (), 3.0, error_kind="http", http_status=500, step=1))
    assert s.set_baseline(4.0) == 1
    h = s.snapshot(5.0).header
    assert (h.failed, h.cancelled, h.baseline_step) == (1, 1, 1)
