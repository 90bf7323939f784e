"""The simulator's banner names the vLLM it serves as its ``/version`` does (issue 26, finding 16:
the banner said "vLLM 0.11" while the monitor's header, from ``/version``, said "0.32.0")."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from infmon.sim.launch import LISTEN_RE, stop_process
from tests.conftest import REPO, infmon_cmd

pytestmark = pytest.mark.e2e


def test_the_banner_names_the_version_the_server_answers() -> None:
    proc = subprocess.Popen(
        infmon_cmd("sim", "--host", "127.0.0.1", "--port", "0"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner: list[str] = []
        while not (banner and LISTEN_RE.search(banner[-1])):
            line = proc.stdout.readline()  # the simulator prints, then listens: no wait needed
            assert line, f"the simulator ended: {''.join(banner)}"
            banner.append(line)
        url = LISTEN_RE.search(banner[-1]).group(1)  # type: ignore[union-attr]
        served = httpx.get(f"{url}/version", timeout=5.0).json()["version"]
    finally:
        stop_process(proc)
    text = "".join(banner)
    assert f"vLLM {served}" in text, text
    # any other vLLM version the banner names says what it is, never reads as the server's
    for m in re.finditer(r"vLLM (\d[\w.+-]*)", text):
        if m.group(1) != served:
            assert text[: m.start()].endswith("fitted on "), text
