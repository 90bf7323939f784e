"""Each pane's states: no data yet, normal, server down, spec decoding on and off."""

from __future__ import annotations

from infmon.model.live.session import Session, SessionConfig
from infmon.model.server.snapshot import SourceState, unavailable
from infmon.ui.panes import (
    EventsPane,
    HeaderBar,
    KneePane,
    KvPane,
    LatencyPane,
    ServerPane,
    SpecPane,
    ThroughputPane,
)
from infmon.ui.panes.base import Body
from tests.ui.conftest import make_app
from tests.ui.fakes import ServerFeed, deliver, new_session, populated_session


def text_of(app, pane_type) -> str:
    return app.query_one(pane_type).query_one(Body).last_text.plain


async def test_no_data_yet_shows_dashes_not_zeros(clock):
    app = make_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        app.render_tick()
        assert "waiting for the first scrape" in text_of(app, ServerPane)
        assert "no KV data yet" in text_of(app, KvPane)
        assert text_of(app, LatencyPane) == "no request has finished yet"
        assert text_of(app, ThroughputPane) == "no tokens received yet"
        assert "not yet" in text_of(app, KneePane)
        assert not app.query_one(SpecPane).display
        assert "c=1" in text_of(app, EventsPane)


async def test_normal_with_data(clock):
    session = populated_session(clock)
    app = make_app(session, clock=clock, controller_kw={"concurrency": 16, "paused": False})
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        server = text_of(app, ServerPane)
        # vLLM publishes no max_num_seqs: "/ 8" is inferred from running stuck at 8 while 8 wait
        assert "running 8 / 8" in server and "waiting 8" in server
        assert "prefix hits 0%" in server
        kv = text_of(app, KvPane)
        # the capture's cache_config_info: 8,192 blocks × 128 tokens
        assert "96%" in kv and "1,048,576 tokens ≈ 4,096 seqs" in kv and "at 192 tokens each" in kv
        tp = text_of(app, ThroughputPane)
        assert "out 475 tok/s" in tp and "server 480 tok/s" in tp
        assert "✓ p90≤500ms" in text_of(app, LatencyPane)
        knee = text_of(app, KneePane)
        assert "knee c=8" in knee and "SLO limit ≥ 16, not reached" in knee
        assert "queueing: 8 waiting" in text_of(app, EventsPane)
        header = text_of(app, HeaderBar)
        assert "closed loop c=16" in header and "tiny-gpt2" in header and "0 failed" in header


async def test_server_down_shows_when_it_went_down(clock):
    session = new_session(clock)
    feed = ServerFeed()
    deliver(session, feed.scrape(1.0), 1.0)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)):
        clock.advance(65.0)
        deliver(session, unavailable(65.0, SourceState.DOWN, "connect", "connection refused"), 65.0)
        clock.advance(5.0)
        app.render_tick()
        server = text_of(app, ServerPane)
        assert "DOWN since 00:01:05: connection refused" in server
        assert "last scrape 69 s ago" in server
        assert "server down" in text_of(app, HeaderBar)
        assert "server not answering" in text_of(app, EventsPane)
        deliver(session, feed.scrape(clock.advance(1.0), running=3), clock.now())
        app.render_tick()
        assert "DOWN" not in text_of(app, ServerPane)
        assert "running 3" in text_of(app, ServerPane)
        assert "server back up after 6.0 s" in text_of(app, EventsPane)


async def test_a_server_without_metrics_says_so_instead_of_waiting(clock):
    """`transformers serve` has no /metrics: the poller reports `no_metrics`, which is an answer."""
    session = new_session(clock)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)):
        assert "waiting for the first scrape" in text_of(app, ServerPane)
        snap = unavailable(1.0, SourceState.NO_METRICS, "no_metrics", "http://x/metrics: 404")
        deliver(session, snap, clock.advance(1.0))
        app.render_tick()
        server = text_of(app, ServerPane)
        assert "no server metrics" in server and "waiting" not in server
        assert "DOWN" not in server and "server down" not in text_of(app, HeaderBar)
        assert "no server metrics" in text_of(app, KvPane)
        deliver(session, snap, clock.advance(1.0))  # every poll: one event, no storm
        app.render_tick()
        assert text_of(app, EventsPane).count("no /metrics") == 1


async def test_spec_decoding_pane_only_when_the_server_does_it(clock):
    session = new_session(clock)
    feed = ServerFeed()
    deliver(session, feed.scrape(0.0), 0.0)
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)):
        deliver(session, feed.scrape(clock.advance(1.0)), clock.now())
        app.render_tick()
        assert not app.query_one(SpecPane).display
        deliver(session, feed.scrape(clock.advance(1.0), spec=0.12), clock.now())
        deliver(session, feed.scrape(clock.advance(1.0), spec=0.12), clock.now())
        app.render_tick()
        assert app.query_one(SpecPane).display
        spec = text_of(app, SpecPane)
        assert "acceptance α 0.33 per position" in spec and "mean acceptance length 1.48" in spec
        assert "low acceptance α" in text_of(app, EventsPane)


async def test_untrusted_text_is_never_markup(clock):
    session = Session(SessionConfig(endpoint="http://x/[bold]"), start_s=0.0)
    session.set_server_info(model="[red]evil[/red] <script>")
    app = make_app(session, clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("m", *"[bold]note[/]", "enter")
        header = text_of(app, HeaderBar)
        assert "[red]evil[/red] <script>" in header and "http://x/[bold]" in header
        assert "mark: [bold]note[/]" in text_of(app, EventsPane)


async def test_compact_fold_at_80x24(clock):
    app = make_app(populated_session(clock), clock=clock)
    async with app.run_test(size=(80, 24)) as pilot:
        assert app.has_class("-compact")
        assert not app.query_one("#tp-chart").display
        assert app.query_one("#tp-spark").display
        await pilot.resize_terminal(160, 48)
        await pilot.pause()
        assert not app.has_class("-compact")
        assert app.query_one("#tp-chart").display
