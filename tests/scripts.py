"""A script of this repository (``bench/…``, ``scripts/…``) loaded as a module by its path, for
the tests of its arithmetic: those directories are not packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """``relative`` (e.g. ``bench/host_pace.py``) as a module named after its file."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module
