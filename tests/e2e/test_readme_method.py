"""The README's "operator's method, in commands", run as written (only the port is a free one
and ``infmon`` is this checkout's): the reports name the runs ``baseline`` and ``spec``, the SLO
is on both, quality is in both reports, ``runs/compare.html`` has its charts (SVG elements),
and the spec finding says the acceptance in the one vocabulary and names the drafter (the
simulator's spec-pitfall drafter, from its ``speculative_config_info``)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _readme_block() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## The operator's method, in commands", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_readme_method_runs_as_written(tmp_path: Path) -> None:
    block = _readme_block().replace("8000", str(_free_port()))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "infmon"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m infmon "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        ["bash", "-e", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    runs = tmp_path / "runs"
    for name in ("baseline", "spec"):
        md = (runs / name / "report.md").read_text()
        html = (runs / name / "report.html").read_text()
        assert f"# infmon report: {name}" in md
        assert f"<title>infmon report: {name}</title>" in html
        limit = re.search(r"\*\*SLO limit:\*\* (.+)", md)
        assert limit is not None and limit.group(1) != "no SLO set", md
        assert "## Output quality" in md and "No quality run" not in html
    text = (runs / "compare.txt").read_text()
    assert text.startswith("compare: baseline baseline vs spec"), text[:200]
    page = (runs / "compare.html").read_text()
    assert page.count("<svg") >= 3 and page.count("<path") >= 6, "no overlay charts"
    assert "<title>Output tokens/s against concurrency</title>" in page
    assert "<title>Acceptance per draft position</title>" in page
    spec = [line for line in text.splitlines() if "spec: spec decoding" in line]
    assert spec and "acceptance α" in spec[0] and "mean acceptance length" in spec[0], text
    assert "drafter deepseek-ai/DeepSeek-R1-Distill-Qwen-7B" in spec[0], spec[0]
