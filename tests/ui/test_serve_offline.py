"""`infmon serve`'s page fetches nothing from another host (issue 26, finding 16: the page loaded
its font from Google's CDN; a bastion has no internet). The page is rendered by the real web
server on loopback, and every URL it names is fetched from that server."""

from __future__ import annotations

import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

from infmon.ui.web import GuardedServer
from tests.e2e.conftest import free_port

URL_IN_PAGE = re.compile(r"""(?:href|src)\s*=\s*["']([^"']+)["']|url\(\s*["']?([^"')]+)""")


@pytest.mark.asyncio
async def test_the_page_names_only_its_own_server_and_ships_its_font() -> None:
    port = free_port()
    server = GuardedServer("true", "127.0.0.1", port, "tok", "banner")
    client = TestClient(TestServer(await server._make_app(), host="127.0.0.1", port=port))
    await client.start_server()
    try:
        page = await (await client.get("/?token=tok")).text()
        urls = [a or b for a, b in URL_IN_PAGE.findall(page)]
        assert urls, page
        remote = [u for u in urls if not u.startswith("/")]
        assert remote == [], remote  # fonts.googleapis.com was one
        assert "@font-face" in page and "Roboto Mono" in page
        for url in urls:
            got = await client.get(url)
            assert got.status == 200, url
            assert len(await got.read()) > 1000, url
    finally:
        await client.close()
