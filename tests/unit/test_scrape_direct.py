"""DirectSource over httpx.MockTransport: rates between polls, 404 = no server metrics."""

from __future__ import annotations

import httpx

from infmon.clock import FakeClock
from infmon.model.server.snapshot import ServerSnapshot, SourceState
from infmon.sources.poller import MetricPoller
from infmon.sources.scraper import DirectSource, split_url


def transport(pages: list[str], status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 2048}]})
        if request.url.path == "/version":
            return httpx.Response(200, json={"version": "0.32.0"})
        if request.url.path == "/metrics" and status == 200:
            return httpx.Response(200, text=pages.pop(0))
        return httpx.Response(status)

    return httpx.MockTransport(handler)


def gen_page(n: float) -> str:
    return f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {n}\n'


def test_split_url() -> None:
    assert split_url("http://h:1/") == ("http://h:1", "http://h:1/metrics")
    assert split_url("http://h:1/metrics") == ("http://h:1", "http://h:1/metrics")


async def test_poller_rates_and_restart_between_polls() -> None:
    clock = FakeClock()
    client = httpx.AsyncClient(transport=transport([gen_page(10), gen_page(30), gen_page(5)]))
    seen: list[ServerSnapshot] = []
    poller = MetricPoller(DirectSource("http://x", client=client), 2.0, seen.append, clock)
    for _ in range(3):
        await poller.poll_once()
        clock.advance(2.0)
    assert seen[0].generation_tokens_per_s is None and seen[0].max_model_len == 2048
    assert seen[0].backend_version == "0.32.0" and seen[0].models == ("m",)
    assert seen[1].generation_tokens_per_s == 10.0 and not seen[1].server_restarted
    assert seen[2].server_restarted and seen[2].generation_tokens_per_s == 2.5
    assert poller.restarts == 1
    await client.aclose()


async def test_404_is_no_server_metrics() -> None:
    client = httpx.AsyncClient(transport=transport([], status=404))
    seen: list[ServerSnapshot] = []
    poller = MetricPoller(DirectSource("http://x", client=client), 1.0, seen.append, FakeClock())
    await poller.poll_once()
    assert seen[0].state == SourceState.NO_METRICS and seen[0].error_kind == "no_metrics"
    await client.aclose()


async def test_garbage_page_is_a_parse_error_as_data() -> None:
    client = httpx.AsyncClient(transport=transport(["<html>oops</html>"]))
    seen: list[ServerSnapshot] = []
    poller = MetricPoller(DirectSource("http://x", client=client), 1.0, seen.append, FakeClock())
    await poller.poll_once()
    assert seen[0].state == SourceState.DOWN and seen[0].error_kind == "parse"
    await client.aclose()
