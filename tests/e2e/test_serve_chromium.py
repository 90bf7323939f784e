"""`infmon serve demo` opened in headless Chromium (issue 17, must show 4).

Chromium loads the page, textual-serve starts a monitor for it, and the browser's terminal
draws it. The terminal paints on a canvas, so the test reads what the page received over its
websocket (Chromium's DevTools protocol reports every frame) and asserts the throughput figures
and the KV gauge are there; it also keeps a screenshot of the page (``serve.png``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, system_tool
from tests.e2e.conftest import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow]
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07")


def _wait_http(url: str, timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never answered")


def _printed_url(path: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        m = re.search(r"http://\S+/\?token=[\w-]+", path.read_text())
        if m:
            return m.group()
        time.sleep(0.1)
    raise AssertionError(f"no URL printed: {path.read_text()}")


async def _browse(
    devtools_port: int, url: str, seconds: float, shot: Path, asked: list[str] | None = None
) -> str:
    """Open ``url`` in a new tab, gather the text of every websocket frame the page receives
    for ``seconds``, save a screenshot; return the text (escape sequences removed). Every URL
    the page requests is added to ``asked``."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{devtools_port}/json/new?about:blank") as r:
            tab = json.loads(await r.text())
        async with http.ws_connect(tab["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 1_000_000))

            async def call(method: str, **params: object) -> int:
                n = next(ids)
                await ws.send_json({"id": n, "method": method, "params": params})
                return n

            await call("Network.enable")
            await call("Page.enable")
            await call(
                "Emulation.setDeviceMetricsOverride",
                width=1600,
                height=1000,
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Page.navigate", url=url)
            frames: list[str] = []
            deadline = time.monotonic() + seconds
            shot_id: int | None = None
            while True:
                left = deadline - time.monotonic()
                if left <= 0 and shot_id is None:
                    shot_id = await call("Page.captureScreenshot", format="png")
                try:
                    msg = await ws.receive_json(timeout=max(left, 5.0))
                except asyncio.TimeoutError:
                    break
                if msg.get("method") == "Network.requestWillBeSent" and asked is not None:
                    asked.append(msg["params"]["request"]["url"])
                if msg.get("method") == "Network.webSocketFrameReceived":
                    resp = msg["params"]["response"]
                    data = resp["payloadData"]
                    raw = base64.b64decode(data) if resp.get("opcode") == 2 else data.encode()
                    frames.append(raw.decode("utf-8", "replace"))
                elif shot_id is not None and msg.get("id") == shot_id:
                    shot.write_bytes(base64.b64decode(msg["result"]["data"]))
                    break
    return ANSI.sub(" ", "".join(frames))


def test_the_monitor_in_a_browser_shows_throughput_and_the_kv_gauge(tmp_path) -> None:
    chromium = system_tool("chromium")
    pytest.importorskip("textual_serve", reason="infmon serve needs textual-serve")
    port, devtools = free_port(), free_port()
    argv = ["serve", "--listen", f"127.0.0.1:{port}", "demo", "--session-dir", str(tmp_path / "s")]
    banner = tmp_path / "serve.log"
    serve = subprocess.Popen(
        [sys.executable, "-m", "infmon", *argv],
        cwd=REPO,
        stdout=banner.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    chrome = None
    try:
        page = _printed_url(banner, 30)  # the page needs the token of the printed URL
        _wait_http(page, 30)
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--remote-debugging-port={devtools}",
            f"--user-data-dir={tmp_path / 'profile'}",
        ]
        chrome = subprocess.Popen(
            [chromium, *flags, "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _wait_http(f"http://127.0.0.1:{devtools}/json/version", 30)
        shot = tmp_path / "serve.png"
        asked: list[str] = []
        text = asyncio.run(_browse(devtools, page, 25.0, shot, asked))
    finally:
        for proc in (chrome, serve):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, 15)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
    words = " ".join(text.split())
    assert "Throughput" in words and "KV cache" in words, words[-2000:]
    tok = [float(x.replace(",", "")) for x in re.findall(r"out ([\d,]+) tok/s", words)]
    assert tok and max(tok) > 0, "the page never showed a nonzero throughput"
    assert re.search(r"[█░]{5,}\s+\d+%", text), "the KV gauge (a bar and its %) is drawn"
    assert shot.exists() and shot.stat().st_size > 20_000, "a screenshot of the drawn page"
    # the page fetches nothing but from infmon serve (it loaded its font from a public CDN)
    origin = page.split("/?", 1)[0]
    assert asked and all(u.startswith((origin, "ws://127.0.0.1", "data:")) for u in asked), asked
    # the key row is drawn although a headless page never has the keyboard (Textual's footer
    # skipped every redraw while blurred, and the row stayed empty)
    assert "quit" in words and "help" in words and "pause" in words, words[-2000:]
