"""A hostile web page against ``infmon serve`` (#27, finding 2).

Before, a WebSocket from any page (``Origin: http://evil.example``) started a monitor that
drove load against the operator's server and streamed the screen back; the banner and ``ps``
showed ``--api-key``. Now the page and its WebSocket need the token of the printed URL, the
Origin must be the page's own, and the key reaches each page's monitor by its environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import REPO, infmon_cmd
from tests.e2e.conftest import free_port
from tests.hostile.kit import KEY, _tree, clean_env, run_infmon
from tests.hostile.server import serve

pytestmark = pytest.mark.e2e


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen, timeout_s: float) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = re.search(pattern, path.read_text())
        if m:
            return m
        assert proc.poll() is None, path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} within {timeout_s} s: {path.read_text()}")


async def _ws_status(url: str, origin: str | None, extra: dict[str, str] | None = None) -> int:
    """The status a WebSocket handshake gets (101 when it is accepted; then closed)."""
    headers = ({"Origin": origin} if origin else {}) | (extra or {})
    async with aiohttp.ClientSession() as http:
        try:
            async with http.ws_connect(url + "?width=80&height=24", headers=headers) as ws:
                await ws.close()
                return 101
        except aiohttp.WSServerHandshakeError as exc:
            return exc.status


async def _page_status(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        return r.status, await r.text()


def _cmdlines(pid: int) -> list[bytes]:
    out = []
    for p in _tree(pid):
        with contextlib.suppress(OSError):
            out.append(Path(f"/proc/{p}/cmdline").read_bytes())
    return out


def test_only_the_printed_url_opens_a_page_and_the_key_never_shows(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "serve.log"
    with serve("benign") as (url, srv), open(log, "wb") as out:
        proc = subprocess.Popen(
            infmon_cmd(
                *("serve", "--listen", f"127.0.0.1:{port}", url, "--api-key", KEY),
                *("--session-dir", str(tmp_path / "s")),
            ),
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=clean_env(tmp_path),
            start_new_session=True,
        )
        try:
            m = _wait_for(log, r"http://127\.0\.0\.1:\d+/\?token=([\w-]+)", proc, 30)
            token, base = m.group(1), f"http://127.0.0.1:{port}"
            assert all(KEY.encode() not in c for c in _cmdlines(proc.pid))
            ws = f"ws://127.0.0.1:{port}/ws"
            statuses = asyncio.run(_statuses(base, ws, token))
            assert srv.log.generations() == [], "a refused page started a monitor"
            assert statuses == {
                "page without token": 403,
                "page with token": 200,
                "ws without token": 403,
                "ws with a wrong token": 403,
                "ws from evil.example": 403,
                "ws via a rebound name": 403,
            }, statuses
            accepted = asyncio.run(_hold_page(f"{ws}/{token}", base, srv, proc.pid))
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
    text = log.read_text()
    assert accepted["auth"] == f"Bearer {KEY}", "the page's monitor did not get the key"
    assert not any(KEY.encode() in c for c in accepted["cmdlines"]), accepted["cmdlines"]
    assert KEY not in text and "Traceback" not in text, text


async def _statuses(base: str, ws: str, token: str) -> dict[str, int]:
    rebound = base.replace("127.0.0.1", "evil.example")
    page, body = await _page_status(f"{base}/?token={token}")
    assert f"/ws/{token}" in body
    return {
        "page without token": (await _page_status(f"{base}/"))[0],
        "page with token": page,
        "ws without token": await _ws_status(ws, base),
        "ws with a wrong token": await _ws_status(f"{ws}/{token[:-2]}xx", base),
        "ws from evil.example": await _ws_status(f"{ws}/{token}", "http://evil.example"),
        "ws via a rebound name": await _ws_status(  # evil.example resolved to 127.0.0.1
            f"{ws}/{token}", rebound, {"Host": rebound.split("//")[1]}
        ),
    }


async def _hold_page(ws_url: str, origin: str, srv, pid: int) -> dict:
    """The operator's own page: held open until its monitor sent load with the key."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(ws_url + "?width=120&height=40", headers={"Origin": origin}) as ws,
    ):
        await ws.send_json(["resize", {"width": 120, "height": 40}])
        deadline = time.monotonic() + 40
        while not srv.log.auth and time.monotonic() < deadline:
            with contextlib.suppress(asyncio.TimeoutError):
                await ws.receive(timeout=0.2)
        cmdlines = _cmdlines(pid)
        await ws.close()
    return {"auth": srv.log.auth[0] if srv.log.auth else None, "cmdlines": cmdlines}


def test_another_address_needs_allow_remote(tmp_path: Path) -> None:
    ran = run_infmon("serve", "--listen", f"0.0.0.0:{free_port()}", "demo", home=tmp_path)
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.show()
    assert "--allow-remote" in ran.stderr
