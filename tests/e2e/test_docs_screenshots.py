"""The README's screenshots are the current app's: ``docs/screenshots.py`` is run against the
simulator and its output compared with the committed SVGs by pane text (not pixels): the same
panes, the same footer, and lines in the vocabulary the app speaks now (a unit in each
latency figure, acceptance as α and mean acceptance length, thousands separated)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "docs"))
from screenshots import screen_lines

SHOTS = ("screenshot-160x48.svg", "screenshot-80x24.svg")
PHASES = re.compile(r"queue ([^\s│]+) prefill ([^\s│]+) decode ([^\s│]+)")
UNIT = re.compile(r"<1ms|[\d.,]+ms|[\d.,]+s|—")
STALE = ("acc ", "mean length ", "1.02k", " ms ms")
"""Words the app no longer writes (the old vocabulary)."""


def _titles(lines: list[str]) -> set[str]:
    return {t.strip() for line in lines for t in re.findall(r"╭─ ([^─]+?) ─", line)}


def _footer(lines: list[str]) -> str:
    return " ".join(lines[-1].split())


def vocabulary_problems(lines: list[str]) -> list[str]:
    """Lines of a screenshot that break the app's current vocabulary."""
    out = [line for line in lines if any(w in line for w in STALE)]
    for line in lines:
        if (m := PHASES.search(line)) and not all(UNIT.fullmatch(v) for v in m.groups()):
            out.append(line)
    return out


@pytest.mark.parametrize("name", SHOTS)
def test_the_committed_screenshots_speak_the_current_vocabulary(name: str) -> None:
    lines = screen_lines((REPO / "docs" / name).read_text())
    assert lines, name
    assert vocabulary_problems(lines) == [], name


@pytest.mark.e2e
@pytest.mark.slow
def test_the_docs_script_gives_the_committed_screens(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "docs" / "screenshots.py"), "--out", str(tmp_path)],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=600,
    )
    for name in SHOTS:
        fresh = screen_lines((tmp_path / name).read_text())
        committed = screen_lines((REPO / "docs" / name).read_text())
        assert _titles(fresh) == _titles(committed), name
        assert _footer(fresh) == _footer(committed), name
        assert vocabulary_problems(fresh) == [], name
