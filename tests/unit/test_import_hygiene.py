"""The domain stays pure: importing it must not load Textual or Rich."""

import subprocess
import sys
from pathlib import Path

DOMAIN = [
    "infmon.model.records.request",
    "infmon.model.records.stats",
    "infmon.model.steps.knee",
    "infmon.model.server.snapshot",
    "infmon.model.live.session",
    "infmon.load.driver",
    "infmon.sources.canonical",
    "infmon.journal.writer",
    "infmon.report",
    "infmon.quality",
    "infmon.sim.engine",
]

CHECK = """
import importlib, sys
for name in {mods!r}:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if not exc.name.startswith("infmon"):
            raise
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "rich"))
print(",".join(bad))
"""


def test_domain_imports_no_textual():
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(mods=DOMAIN)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "", f"domain modules pulled in: {out.stdout.strip()}"


def test_import_linter_contract():
    out = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stdout + out.stderr
