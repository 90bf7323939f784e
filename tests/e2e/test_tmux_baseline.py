"""`infmon URL --baseline RUN` in a real terminal against ``spec-pitfall`` (issue 20, must show 1).

A baseline session is recorded with ``bench`` on the baseline simulator (c=1 and c=16); the
monitor then holds c=1 and c=16 against ``spec-pitfall`` with ``--baseline``. The spec pane must
show, at both levels, the slow-down and the break-even acceptance, and the screen the diagnosis
line; the figures must be the two recorded sessions' own (``compare_run`` over the baseline's
and the live session's journals), within what the requests after the screen was read change.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

import pytest

from infmon.model.compare.baseline import compare_run
from infmon.model.steps.span import CLOSED, Level
from infmon.report.runs import load_run
from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]
LOAD = ("--output-tokens", "64", "--seed", "1")
PANE = re.compile(
    r"(c=1|c=16)\s+α [\d.]+  mean length ([\d.]+).*?\n.*?([\d.]+)× slower · "
    r"(?:break-even α≥([\d.]+)|no α pays), has α ([\d.]+)"
)


def _spec_pane(screen: str) -> str:
    """The spec pane's text, cut out by its border's columns (any layout)."""
    lines = screen.splitlines()
    top = next((i for i, x in enumerate(lines) if "─ Spec decoding" in x), None)
    if top is None:
        return ""
    left = lines[top].rfind("╭", 0, lines[top].index("─ Spec decoding"))
    right = lines[top].index("╮", left)
    out = []
    for line in lines[top + 1 :]:
        if line[left : left + 1] == "╰":
            break
        out.append(line[left + 1 : right])
    return "\n".join(out)


def _pane_figures(screen: str) -> dict[str, tuple[float, float, float]]:
    """Per level on screen: (slow-down ×, break-even α (nan: none pays), α it has)."""
    return {
        m.group(1): (float(m.group(3)), float(m.group(4) or "nan"), float(m.group(5)))
        for m in PANE.finditer(_spec_pane(screen))
    }


def test_the_spec_pane_shows_break_even_and_diagnosis_against_the_baseline(tmp_path) -> None:
    base, live = tmp_path / "baseline", tmp_path / "live"
    with running_sim("--scenario", "baseline", "--seed", "1") as url:
        r = subprocess.run(
            infmon_cmd(
                "bench", url, "--concurrency", "1,16", "--step-duration", "8", "--warmup", "1",
                "--session-dir", str(base), "--label", "baseline", *LOAD,
            ),
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    with running_sim("--scenario", "spec-pitfall", "--seed", "1") as url:
        command = " ".join(
            [
                *infmon_cmd(url), "--concurrency", "1", "--warmup", "1", *LOAD,
                "--baseline", str(base), "--session-dir", str(live),
            ]
        )  # fmt: skip
        t = Tmux(f"infmon-base-{os.getpid()}", "base")
        t.run(
            "new-session", "-d", "-s", "base", "-x", "200", "-y", "60", "-c", str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )  # fmt: skip
        t.run("resize-window", "-t", "base", "-x", "200", "-y", "60")
        try:
            first = t.wait_for("c=1 vs the baseline", lambda s: "c=1" in _pane_figures(s), 90)
            t.keys("]", "]", "]", "]")  # c=1 → 16, coalesced into one step
            screen = t.wait_for("c=16 vs the baseline", lambda s: "c=16" in _pane_figures(s), 90)
            print(first, screen, sep="\n")
            t.keys("q")
            t.wait_for("the report", lambda s: (live / "report.json").exists(), 60)
        finally:
            t.run("kill-server", check=False)
    shown = {**_pane_figures(first), **_pane_figures(screen)}  # a short pane: the latest level
    assert set(shown) == {"c=1", "c=16"}, screen
    header = screen.splitlines()[0]
    assert "vs baseline (speculative: none → draft k" in header, header  # may be cropped
    for level in ("c=1", "c=16"):
        said = (
            rf"{level}: spec is [\d.]+× slower than baseline; (it would need|no acceptance α pays)"
        )
        assert re.search(said, screen), level
    ref = load_run(base).reference()
    run = load_run(live)
    view = compare_run(ref, run.levels, run.facts)
    for label, (slower, be, has) in shown.items():
        c = view.at(Level(CLOSED, int(label[2:])))
        assert c is not None and c.spec is not None and c.spec.economics is not None
        e = c.spec.economics
        print(f"{label}: screen {slower}× slower, α≥{be}, has {has}; recorded {e.verdict()}")
        assert slower == pytest.approx(1 / e.speedup, rel=0.15)
        assert has == pytest.approx(e.alpha, abs=0.05)
        want = e.breakeven_alpha
        if math.isfinite(be) and math.isfinite(want):
            assert be == pytest.approx(want, abs=0.05)
        else:  # this drafter costs about k+1 target passes: "none pays" and "≥ 0.96" both say it
            assert all(math.isnan(x) or x > 0.9 for x in (be, want)), (be, want)
        assert not e.pays and not be <= has
