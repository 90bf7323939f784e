"""The ``Any`` guard of issue 32 (.ci/count_any.py): counted per package, imports not counted,
fails when a count grows, lowers its baseline when one falls. ``scripts/guards_demo.sh`` shows
each guard of ``.ci/guards`` (this one and vulture included) failing on a violation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

COUNT_ANY = REPO / ".ci" / "count_any.py"


def count_any(root: Path, baseline: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(COUNT_ANY), "--root", str(root), "--baseline", str(baseline)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "infmon"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_any_is_counted_per_package_and_its_imports_are_not(tmp_path: Path) -> None:
    root = tree(
        tmp_path,
        {
            "model/a.py": "from typing import Any\n\n\ndef f(x: Any) -> list[Any]:\n    return [x]\n",
            "model/b.py": "import typing\n\nX: typing.Any = None  # Any in a comment\n",
            "cli.py": "def g() -> None:\n    from typing import Any\n\n    y: Any = 1\n",
        },
    )
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"infmon": 1, "infmon.model": 3}))
    out = count_any(root, baseline)
    assert out.returncode == 0, out.stdout
    assert "Any: 4 uses in 2 packages, none grew" in out.stdout


def test_a_grown_count_fails_and_a_lower_one_lowers_the_baseline(tmp_path: Path) -> None:
    root = tree(tmp_path, {"model/a.py": "from typing import Any\n\nX: Any = 1\nY: Any = 2\n"})
    baseline = tmp_path / "base.json"
    baseline.write_text(json.dumps({"infmon.model": 1, "infmon.report": 2}))
    grown = count_any(root, baseline)
    assert grown.returncode == 1
    assert "infmon.model: 2 Any, baseline 1" in grown.stdout
    baseline.write_text(json.dumps({"infmon.model": 3, "infmon.report": 2}))
    lowered = count_any(root, baseline)
    assert lowered.returncode == 0, lowered.stdout
    assert json.loads(baseline.read_text()) == {"infmon.model": 2}  # the ratchet moved down
    assert count_any(root, baseline).returncode == 0
