"""The import-linter contracts in pyproject.toml hold on the tree, and a violation of each
kind fails them (issues 19, 32): a copy of the package with one forbidden import, for each
contract."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

LINT = Path(sys.executable).with_name("lint-imports")

VIOLATIONS = {
    # file in the copy: (line appended, the contract it must break)
    "infmon/model/records/request.py": (
        "import infmon.load.client",
        "Layers: commands wire everything; model and clock import no other infmon package",
    ),
    "infmon/model/steps/knee.py": (
        "import infmon.model.live.session",
        "Model's layers: live, search, compare, steps, records|server, base|shape",
    ),
    "infmon/ui/format.py": (
        "import infmon.journal",
        "The UI imports only model and clock (it renders snapshots)",
    ),
    "infmon/sim/text.py": ("import infmon.model.records.stats", "The simulator stands alone"),
    "infmon/report/fmt.py": ("import rich.text", "Only the UI imports Textual or Rich"),
    "infmon/journal/redact.py": (
        "import infmon.sim.text",
        "Nothing but the commands starts the simulator",
    ),
}


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def contract_lines(out: str) -> dict[str, str]:
    """Each contract's name → KEPT or BROKEN, from lint-imports' summary."""
    verdicts = {}
    for line in out.splitlines():
        for verdict in ("KEPT", "BROKEN"):
            if line.rstrip().endswith(verdict):
                verdicts[line.rstrip()[: -len(verdict)].strip()] = verdict
    return verdicts


@pytest.mark.timeout(600)
def test_the_tree_keeps_every_contract_and_each_violation_breaks_its_own(tmp_path: Path) -> None:
    if not LINT.exists():
        pytest.skip(
            f"lint-imports not installed beside {sys.executable} (pip install -e '.[test]')"
        )
    clean = lint(REPO)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    kept = contract_lines(clean.stdout)
    assert set(kept.values()) == {"KEPT"} and len(kept) >= len(VIOLATIONS), clean.stdout

    for n, (rel, (line, contract)) in enumerate(VIOLATIONS.items()):
        copy = tmp_path / f"tree{n}"
        shutil.copytree(
            REPO / "infmon", copy / "infmon", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
        path = copy / rel
        path.write_text(path.read_text() + f"\n{line}  # a deliberate violation\n")
        broken = lint(copy)
        assert broken.returncode != 0, (rel, broken.stdout)
        assert contract_lines(broken.stdout).get(contract) == "BROKEN", (rel, broken.stdout)
