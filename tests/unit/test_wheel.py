"""The built wheel holds infmon and its data files, never a test helper (issue 19)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.timeout(600)
def test_the_wheel_holds_infmon_and_no_test_helpers(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("infmon-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert tops == {"infmon", next(t for t in tops if t.endswith(".dist-info"))}, tops
    assert not [n for n in names if "/tests/" in n or "synthetic" in n or "conftest" in n]
    for needed in ("infmon/py.typed", "infmon/ui/app.tcss", "infmon/engine/worker.py"):
        assert needed in names, needed
    assert any(n.startswith("infmon/sim/data/") and n.endswith(".toml") for n in names)
