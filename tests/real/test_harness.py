"""The harness itself: the cached env is complete and usable, and servers are always stopped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.real.harness import rs

pytestmark = pytest.mark.real_server


def test_cached_env_is_complete(real_setup) -> None:
    venv, model = real_setup
    marker = json.loads((venv / rs.MARKER).read_text())
    assert marker["vllm"].startswith(rs.VLLM_VERSION) and marker["torch"].endswith("+cpu")
    assert not venv.with_name(venv.name + ".partial").exists()
    assert (model / rs.MARKER).is_file() and (model / "config.json").is_file()
    assert json.loads((model / "config.json").read_text())["n_layer"] == 2


def test_server_is_stopped_with_its_children(real_setup, tmp_path: Path) -> None:
    with rs.serve_transformers(tmp_path) as server:
        os.killpg(server.pid, 0)  # running, in its own process group
    with pytest.raises(ProcessLookupError):
        os.killpg(server.pid, 0)
