"""A real Prometheus server on loopback, scraping a metrics target every second.

``prometheus_for(target_url)`` starts Debian's ``prometheus`` with a temporary config and TSDB,
waits until the target's series are queryable and always stops it. If CI already runs one, set
``INFMON_TEST_PROMETHEUS_URL`` (and ``INFMON_TEST_PROMETHEUS_TARGET``, the URL it scrapes, and
``INFMON_TEST_PROMETHEUS_JOB``): the fixtures then use it instead of starting their own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from infmon.sim.launch import stop_process
from tests.conftest import poll_until, system_tool

JOB = "infmon-e2e"


@dataclass(frozen=True)
class PromTarget:
    prometheus_url: str
    target_url: str
    """The base URL Prometheus scrapes (``/metrics`` is appended)."""
    job: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_series(
    url: str, job: str, timeout_s: float, proc: subprocess.Popen, series: str = "vllm:.+"
) -> None:
    deadline = time.monotonic() + timeout_s
    query = f'count({{job="{job}", __name__=~"{series}"}})'
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prometheus exited with {proc.returncode}")
        try:
            r = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=2.0)
            if r.status_code == 200 and r.json()["data"]["result"]:
                # one more whole scrape of every target, so every family of the page is in
                wait_for_scrape_after(url, time.time(), f'up{{job="{job}"}}', timeout_s, proc)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("prometheus never scraped the target")


def _oldest_scrape(url: str, up: str) -> float | None:
    """The start time of the least recent last scrape among the targets of ``up``."""
    try:
        r = httpx.get(f"{url}/api/v1/query", params={"query": f"min(timestamp({up}))"}, timeout=2)
        result = r.json()["data"]["result"] if r.status_code == 200 else []
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return float(result[0]["value"][1]) if result else None


def wait_for_scrape_after(
    url: str, after: float, up: str = "up", timeout_s: float = 30.0, proc=None
) -> None:
    """Wait until every target of ``up`` (a selector of Prometheus's ``up`` series) has been
    scraped, and the scrape stored, since wall time ``after``: what Prometheus now answers
    includes everything those targets served after ``after``."""
    poll_until(
        lambda: (t := _oldest_scrape(url, up)) is not None and t > after,
        timeout_s,
        f"a scrape of {up} after {after:.1f}",
        proc,
        interval_s=0.1,
    )


@contextmanager
def prometheus_for(
    target_url: str,
    job: str = JOB,
    timeout_s: float = 30.0,
    series: str = "vllm:.+",
    more_targets: tuple[str, ...] = (),
) -> Iterator[str]:
    """Run a real Prometheus scraping ``target_url``/metrics (and ``more_targets``, same path)
    every 1 s; yield its URL once series named like ``series`` are queryable."""
    exe = system_tool("prometheus")
    target = urlsplit(target_url)
    netlocs = ", ".join(f"'{urlsplit(u).netloc}'" for u in (target_url, *more_targets))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="infmon-prom-") as tmp:
        config = Path(tmp) / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: {job}\n    metrics_path: {target.path or ''}/metrics\n"
            f"    static_configs:\n      - targets: [{netlocs}]\n"
        )
        proc = subprocess.Popen(
            [
                exe,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp}/data",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_for_series(url, job, timeout_s, proc, series)
            yield url
        finally:
            stop_process(proc, 10)


@contextmanager
def serving_page(body: bytes) -> Iterator[str]:
    """A tiny HTTP server whose ``/metrics`` is ``body`` (a saved page); 404 elsewhere."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def external_prometheus() -> PromTarget | None:
    url = os.environ.get("INFMON_TEST_PROMETHEUS_URL")
    target = os.environ.get("INFMON_TEST_PROMETHEUS_TARGET")
    if not (url and target):
        return None
    return PromTarget(
        url.rstrip("/"), target.rstrip("/"), os.environ.get("INFMON_TEST_PROMETHEUS_JOB", JOB)
    )
