"""HEAD as vLLM (Starlette under uvicorn) answers it: every GET route 200, anything else 404 or
405, never a body. AIPerf probes the DCGM exporter with ``HEAD /metrics`` through aiohttp, which
breaks on a body after a HEAD answer."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from tests.conftest import running_sim

pytestmark = pytest.mark.e2e

GET_PATHS = ("/v1/models", "/health", "/version", "/metrics", "/metrics/", "/gpu-metrics")


def raw_head(url: str, path: str) -> bytes:
    """Everything the server sends for one HEAD on a fresh connection it is asked to close."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


@pytest.mark.parametrize(
    ("path", "status"),
    [*((p, 200) for p in GET_PATHS), ("/no/such/path", 404), ("/v1/completions", 405)],
)
def test_head_has_status_and_no_body(sim_url, path, status):
    raw = raw_head(sim_url, path)
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert body == b""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_aiohttp_head_on_the_dcgm_port_then_get_on_one_connection():
    """AIPerf's probe; a stray body after HEAD would be read as the next response on a
    kept-alive connection."""
    port = free_port()
    with running_sim("--scenario", "baseline", "--dcgm-port", str(port)) as url:
        dcgm = f"http://127.0.0.1:{port}"
        assert raw_head(dcgm, "/metrics").startswith(b"HTTP/1.1 200 ")
        assert raw_head(dcgm, "/metrics").endswith(b"\r\n\r\n")
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as session:
            for _ in range(2):
                async with session.head(f"{dcgm}/metrics") as resp:
                    assert resp.status == 200
                async with session.head(f"{dcgm}/nothing-here") as resp:
                    assert resp.status == 404
                async with session.get(f"{dcgm}/metrics") as resp:
                    assert resp.status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in await resp.read()
                async with session.head(f"{url}/version") as resp:
                    assert resp.status == 200 and await resp.read() == b""
