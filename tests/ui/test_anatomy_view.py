"""The latency pane's anatomy view (``a``): steps split by the server's per-request figures."""

from __future__ import annotations

from infmon.model.records.request import RequestRecord
from infmon.model.records.server_timing import ServerTiming
from infmon.ui.panes.base import Body
from infmon.ui.panes.latency import LatencyPane
from tests.ui.conftest import make_app


def _rec(i: int, step: int, conc: int, queue_ms: float, front_ms: float) -> RequestRecord:
    sent = 10.0 + i * 0.01
    ttft = (front_ms + queue_ms + 20.0) / 1e3
    chunks = tuple(sent + ttft + k * 0.01 for k in range(11))
    return RequestRecord(
        request_id=i,
        sent_s=sent,
        chunk_times_s=chunks,
        end_s=chunks[-1],
        prompt_tokens=10,
        output_tokens=11,
        step=step,
        concurrency=conc,
        server=ServerTiming(queue_ms, 20.0, 100.0, 10.0),
    )


def _text(app) -> str:
    body = app.query_one(LatencyPane).query_one(Body)
    return body.last_text.plain if body.last_text is not None else ""


async def test_a_shows_each_step_split_and_back(clock) -> None:
    app = make_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("a")
        assert "--enable-per-request-metrics" in _text(app)
        for i in range(20):
            app.session.add_record(_rec(i, 1, 1, 0.5, 2.0))
            app.session.add_record(_rec(100 + i, 2, 64, 300.0, 2.0))
        clock.advance(2.0)
        app.render_tick()
        await pilot.pause()
        text = _text(app)
        lines = [line.split() for line in text.splitlines()]
        rows = {line[0]: line for line in lines if line and line[0].startswith("c=")}
        assert rows["c=1"][1:5] == ["20", "2.0", "0.5", "20.0"]
        assert rows["c=64"][1:5] == ["20", "2.0", "300", "20.0"]
        assert "p90 at c=64" in text and "most client-side" in text
        assert "grows with load" not in text  # queue grew, the client-side share did not
        await pilot.press("a")
        assert "front" not in _text(app)  # the percentiles again


async def test_the_self_check_shows_when_the_client_side_share_grows(clock) -> None:
    app = make_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("a")
        for i in range(20):
            app.session.add_record(_rec(i, 1, 1, 0.5, 2.0))
            app.session.add_record(_rec(100 + i, 2, 64, 0.5, 40.0))
        clock.advance(2.0)
        app.render_tick()
        await pilot.pause()
        assert "client or network limits: client-side" in _text(app)


async def test_the_server_pane_says_why_requests_wait_and_the_cache_share(clock) -> None:
    from infmon.sources.canonical import snapshot_of_page
    from infmon.sources.exposition import parse_exposition
    from infmon.ui.panes.server import ServerPane
    from tests.conftest import REPO

    page = REPO / "tests/fixtures/metrics/vllm-v1-0.32-cpu-perreq-spec.prom"
    snap = snapshot_of_page(parse_exposition(page.read_text()), timestamp_s=1.0)
    app = make_app(clock=clock)
    async with app.run_test(size=(160, 48)) as pilot:
        app.session.add_server(snap, 1.0)
        clock.advance(2.0)
        app.render_tick()
        await pilot.pause()
        body = app.query_one(ServerPane).query_one(Body).last_text
        assert body is not None
        assert "waiting for capacity 0 deferred 0" in body.plain
        assert "prompt from cache 0%" in body.plain
