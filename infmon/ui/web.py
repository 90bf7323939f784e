"""The monitor in a browser: textual-serve runs a command per page under Textual's web driver.

Every page drives load against the operator's server, so the web server lets in only the
operator's own browser: the page and its WebSocket need the random token of this start (in the
URL printed at start, as Jupyter does), the WebSocket's ``Origin`` must be the page's own, and
the ``Host`` must be the address it listens on (a DNS-rebinding page names its own host). Its
banner is ours: textual-serve's prints the command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import re
import shlex
import signal
from asyncio.subprocess import Process
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from aiohttp.web_runner import GracefulExit
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("infmon.serve")
PAGES_STOP_S = 120.0
"""How long a stopped server waits for its pages' monitors to write their reports."""

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
        self.pages: set[asyncio.Task[object]] = set()
        """The open pages' handlers (each runs a monitor until it has written its report)."""
        self.stopping: asyncio.Task[None] | None = None

    def initialize_logging(self) -> None:
        """Plain log lines: textual-serve's show tracebacks with their local variables."""
        logging.basicConfig(level=logging.WARNING, format="infmon serve: %(message)s")

    async def on_startup(self, app: web.Application) -> None:
        """Nothing: textual-serve's prints its own banner here, before the socket listens."""

    def serve(self, debug: bool = False) -> None:
        """textual-serve's ``serve``, with our banner printed once the socket listens: aiohttp
        runs ``on_startup`` before it binds, so a URL printed there could be refused (a test
        that opened it at once was, on a loaded host)."""
        self.debug = debug
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signal.SIGINT, self.request_exit)
            loop.add_signal_handler(signal.SIGTERM, self.request_exit)
        web.run_app(
            self._make_app(),
            host=self.host,
            port=self.port,
            handle_signals=False,
            loop=loop,
            print=lambda *_: print(self.banner, flush=True),
        )

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
        """textual-serve's page, which also reads its monitor to the end: textual-serve stops
        reading once the browser has gone, while the monitor is still quitting and writing its
        report (its frames would fill the pipe, or its process be left to the server's end)."""
        self._check(request, request.match_info["token"], websocket=True)
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)

        async def close() -> None:
            await websocket.close()

        service = AppService(
            self.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
            debug=self.debug,
        )
        page = asyncio.current_task()
        assert page is not None  # aiohttp runs each handler in its own task
        self.pages.add(page)
        try:
            await service.start(width, height)
            with contextlib.suppress(ConnectionError):
                await self._process_messages(websocket, service)
        finally:
            await service.stop()  # "quit" to the monitor; read while the page takes it
            await _read_to_the_end(service._process)  # the page's process: kept nowhere else
            self.pages.discard(page)
            await websocket.close()
        return websocket

    def request_exit(self) -> None:
        """Ctrl+C or SIGTERM: each page's monitor gets SIGTERM (as a stop of the whole group
        gives it) and the server keeps reading them while they write their reports, then
        stops; a second Ctrl+C stops it at once. Stopping the web server first would cancel
        the pages and leave the monitors' output unread, their loop closed under them."""
        if self.stopping is not None or not self.pages:
            raise GracefulExit()
        self.stopping = asyncio.get_running_loop().create_task(self._stop_pages())

    async def _stop_pages(self) -> None:
        pages = set(self.pages)
        log.warning("stopping: %d page(s) writing their reports (Ctrl+C again: now)", len(pages))
        for pid in page_processes(self.command):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        _, left = await asyncio.wait(pages, timeout=PAGES_STOP_S)
        if left:
            log.warning("%d page(s) still writing after %.0f s: left", len(left), PAGES_STOP_S)
        asyncio.get_running_loop().call_soon(_exit_now)

    async def handle_download(self, request: web.Request) -> web.StreamResponse:
        self._check(request, request.query.get("token", self.token), websocket=True)
        return await super().handle_download(request)


def child_pids(pid: int | str = "self") -> set[int]:
    """A process's children (Linux's /proc; elsewhere none are known)."""
    out: set[int] = set()
    for f in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            out |= {int(child) for child in f.read_text().split()}
    return out


def page_processes(command: str) -> set[int]:
    """The pages' monitors: this process's children or grandchildren (textual-serve runs
    ``command`` through a shell) whose command line is ``command``."""
    argv = shlex.split(command)
    kids = child_pids()
    found = set()
    for pid in kids | {g for k in kids for g in child_pids(k)}:
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1] == [
                a.encode() for a in argv
            ]:
                found.add(pid)
    return found


async def _read_to_the_end(process: Process | None) -> None:
    """A page's monitor read until it closes its output (what it still draws goes nowhere)
    and waited for."""
    if process is None:
        return
    if process.stdout is not None:
        with contextlib.suppress(OSError, ValueError):
            while await process.stdout.read(1 << 16):
                pass
    await process.wait()
    await asyncio.sleep(0)  # its pipes' ends taken in while the loop runs


def _exit_now() -> None:
    raise GracefulExit()  # a SystemExit: out of the loop, into aiohttp's orderly stop


def serve(command: str, host: str, port: int, token: str, banner: str) -> None:
    """Answer HTTP on ``host:port`` until interrupted; each page (with ``token``) runs
    ``command``."""
    GuardedServer(command, host, port, token, banner).serve()
