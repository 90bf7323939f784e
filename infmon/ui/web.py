"""The monitor in a browser: textual-serve runs a command per page under Textual's web driver.

Every page drives load against the operator's server, so the web server lets in only the
operator's own browser: the page and its WebSocket need the random token of this start (in the
URL printed at start, as Jupyter does), the WebSocket's ``Origin`` must be the page's own, and
the ``Host`` must be the address it listens on (a DNS-rebinding page names its own host). Its
banner is ours: textual-serve's prints the command line.
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

log = logging.getLogger("infmon.serve")

REMOTE_LINK = re.compile(r"<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*>", re.S)
"""A stylesheet from another host (textual-serve's page loads its font from Google's CDN)."""
LOCAL_FONTS = """<style>
      @font-face { font-family: "Roboto Mono"; font-style: normal;
        src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }
      @font-face { font-family: "Roboto Mono"; font-style: italic;
        src: url("{{ config.static.url }}fonts/RobotoMono-Italic-VariableFont_wght.ttf"); }
    </style>"""
"""The same font from textual-serve's own static files: a bastion has no internet."""


class SelfContainedPages(jinja2.FileSystemLoader):
    """textual-serve's templates with every remote stylesheet replaced by the fonts it ships:
    the page fetches nothing but from this server."""

    def get_source(
        self, environment: jinja2.Environment, template: str
    ) -> tuple[str, str, Callable[[], bool]]:
        source, filename, uptodate = super().get_source(environment, template)
        return REMOTE_LINK.sub(lambda _: LOCAL_FONTS, source), filename, uptodate


def origin_allowed(origin: str | None, host_header: str, hosts: frozenset[str]) -> bool:
    """A WebSocket's ``Origin`` is the page's own (same host and port as its ``Host``), and
    that host is one this server answers for; no ``Origin`` (not a browser) is judged by the
    token alone."""
    if host_header.lower() not in hosts:
        return False
    if origin is None:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host_header.lower()


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` headers a page of ``host:port`` may carry (loopback's names too)."""
    names = {host}
    if host in ("127.0.0.1", "localhost", "::1"):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    if ":" in host and not host.startswith("["):
        names = {f"[{host}]"} | names - {host}
    return frozenset(f"{n}:{port}".lower() for n in names)


class GuardedServer(Server):
    """textual-serve's server with a token, an Origin and Host check, and our own banner."""

    def __init__(self, command: str, host: str, port: int, token: str, banner: str) -> None:
        super().__init__(command, host=host, port=port, title="infmon")
        self.token, self.banner = token, banner
        self.hosts = allowed_hosts(host, port)

    def initialize_logging(self) -> None:
        """Plain log lines: textual-serve's show tracebacks with their local variables."""
        logging.basicConfig(level=logging.WARNING, format="infmon serve: %(message)s")

    async def on_startup(self, app: web.Application) -> None:
        print(self.banner, flush=True)

    async def _make_app(self) -> web.Application:
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=SelfContainedPages(self.templates_path))
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get("/ws", self.handle_tokenless),
                web.get("/ws/{token}", self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_startup.append(self.on_startup)
        return app

    def _check(self, request: web.Request, token: str, *, websocket: bool) -> None:
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            log.warning("refused %s %s: no or wrong token", request.method, request.path[:4])
            raise web.HTTPForbidden(text="infmon serve: open the URL printed at start\n")
        origin = request.headers.get("Origin") if websocket else None
        if not origin_allowed(origin, request.host, self.hosts):
            log.warning("refused a WebSocket from %r (Host %r)", origin, request.host)
            raise web.HTTPForbidden(text="infmon serve: cross-origin request refused\n")

    async def handle_index(self, request: web.Request) -> Any:
        self._check(request, request.query.get("token", ""), websocket=False)
        font_size = to_int(request.query.get("fontsize", "16"), 16)
        ws_path = request.app.router["websocket"].url_for(token=self.token)
        context = {
            "font_size": font_size,
            "app_websocket_url": f"ws://{request.host}{ws_path}",
            "config": {"static": {"url": "/static/"}},
            "application": {"name": self.title},
        }
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    async def handle_tokenless(self, request: web.Request) -> web.StreamResponse:
        self._check(request, "", websocket=True)
        raise AssertionError("unreachable: an empty token never matches")

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        self._check(request, request.match_info["token"], websocket=True)
        return await super().handle_websocket(request)

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        self._check(request, request.query.get("token", self.token), websocket=True)
        return await super().handle_download(request)


def serve(command: str, host: str, port: int, token: str, banner: str) -> None:
    """Answer HTTP on ``host:port`` until interrupted; each page (with ``token``) runs
    ``command``."""
    GuardedServer(command, host, port, token, banner).serve()
