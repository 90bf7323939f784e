"""The operator's screen in a real terminal (issue 17, findings 2, 5, 6, 7, 9, 10 and 16), one
monitor on the baseline simulator driven by keys in tmux:

- 2: started paused, a hint line says what to do, the footer says ``space start`` and shows
  every key at 200 columns, ``?`` lists every key, no phantom server tok/s while paused;
- 7: Ctrl+P lists infmon's commands only (one Quit, no Textual screenshot or theme picker);
- 9: the latency rows carry their unit, the SLO verdict names the percentile, goodput its unit;
- 10: ``b`` puts the baseline (step and level) in the header, which keeps the backend and the
  baseline at 120 columns; at c=2 the throughput is not compared with the c=1 baseline, and back
  at c=1 (a new step) it is, with a signed change;
- 16: no junk step from quick presses while paused (the step the load starts at is step 1);
- 6: ``q`` says at once that it is quitting, then a summary paragraph on the shell.
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.conftest import REPO, infmon_cmd, running_sim
from tests.e2e.test_tmux_demo import Tmux

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

FOOTER = ("+1", "−1", "×2", "÷2", "rate mode", "start", "sweep", "mark", "baseline", "report",
          "theme", "quit", "help")  # fmt: skip
HELP = ("concurrency +1", "concurrency −1", "double the load", "halve the load", "rate mode",
        "start / pause / resume", "automatic sweep", "add a mark", "as the baseline",
        "session report now", "next theme", "final report and quit", "show the keys")  # fmt: skip


def test_the_screen_guides_a_newcomer(tmp_path) -> None:
    session = tmp_path / "session"
    with running_sim("--scenario", "baseline", "--seed", "5") as url:
        command = " ".join([*infmon_cmd(url), "--slo", "ttft=500ms", "--session-dir", str(session)])
        t = Tmux(f"infmon-screen-{os.getpid()}", "screen")
        t.run(
            "new-session", "-d", "-s", "screen", "-x", "200", "-y", "60", "-c", str(REPO),
            f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 30",
        )  # fmt: skip
        try:
            _paused_start(t)
            _help_and_palette(t)
            _running(t)
            out = _quit(t)
        finally:
            t.run("kill-server", check=False)
    assert re.search(r"infmon: .* steps?, [\d,]+ requests \(0 failed, [\d,]+ cancelled\)", out)
    assert "writing the report" in out
    assert "Peak" in out or "No step was held long enough to judge" in out


def _footer(screen: str) -> str:
    """The last line of the screen (the footer), blank or not."""
    lines = screen.split("\n")
    while lines and lines[-1] == "":  # capture-pane ends with a newline
        lines.pop()
    return lines[-1] if lines else ""


def _paused_start(t: Tmux) -> None:
    screen = t.wait_for("the paused start", lambda s: "space start" in _footer(s), 60)
    assert "paused: space starts c=1, w sweeps" in screen
    footer = _footer(screen)
    missing = [k for k in FOOTER if k not in footer]
    assert not missing, f"footer lacks {missing}: {footer}"
    t.keys("+", "+", "-", "-")  # quick presses while paused: no junk steps
    screen = t.wait_for("a scrape", lambda s: "running 0" in s, 30)
    t.run("send-keys", "-t", "screen", "")  # a moment later, still paused
    screen = t.screen()
    assert "no tokens received yet" in screen, "no phantom throughput while paused"
    assert not re.search(r"server 0\.\d tok/s", screen)


def _help_and_palette(t: Tmux) -> None:
    t.keys("?")
    screen = t.wait_for("the help", lambda s: "show the keys" in s, 10)
    missing = [h for h in HELP if h not in screen]
    assert not missing, f"? lacks {missing}"
    t.keys("Escape")
    t.wait_for("the help to close", lambda s: "show the keys" not in s, 10)
    t.keys("C-p")
    t.wait_for("the palette", lambda s: "key: space" in s or "key: q" in s, 10)
    t.run("send-keys", "-t", "screen", "-l", "quit")
    screen = t.wait_for("palette matches", lambda s: "final report and quit" in s, 10)
    assert screen.lower().count("quit the application") == 0
    t.run("send-keys", "-t", "screen", "C-u")
    t.run("send-keys", "-t", "screen", "-l", "screenshot")
    screen = t.wait_for("palette for screenshot", lambda s: "screenshot" in s, 10)
    assert "Save an SVG" not in screen and "Change theme" not in screen
    t.keys("Escape")
    t.wait_for("the palette to close", lambda s: "key: " not in s, 10)


def _running(t: Tmux) -> None:
    t.keys("space")
    screen = t.wait_for(
        "latency rows", lambda s: re.search(r"TTFT\s+[\d.,]+/\s*[\d.,]+/\s*[\d.,]+ (ms|s)", s), 60
    )
    assert "space pause" in _footer(screen)
    assert re.search(r"[✓✗] p90≤500ms", screen), "the SLO verdict names its percentile"
    assert re.search(r"/s in SLO\)", screen), "goodput has its unit"
    assert "step 1: c=1" in screen and "step 2" not in screen, "no junk steps"
    t.wait_for("a measured step", lambda s: re.search(r"│\s+1\s+1\s+[\d,]+ ", s), 30)
    t.keys("b")
    screen = t.wait_for("the baseline", lambda s: "baseline step 1 (c=1)" in s, 10)
    t.run("resize-window", "-t", "screen", "-x", "120", "-y", "40")
    # One capture shows the whole repainted header: a second capture could land mid-repaint
    # (CI once read a chart row as line 1), which no one at the terminal ever sees.
    t.wait_for("the header at 120 columns", _header_fits_120, 10)
    t.keys("]")  # c=2: another level's throughput is not a regression against c=1's
    t.wait_for("not compared at c=2", lambda s: "compared at c=1 only" in s, 30)
    t.keys("[")  # back at the baseline's level, in a new step: compared again
    screen = t.wait_for(
        "compared at c=1 again",
        lambda s: re.search(r"vs baseline step 1 \(c=1, [\d,.]+ tok/s\) [+−-]\d", s),
        60,
    )
    assert "compared at c=1 only" not in screen


def _header_fits_120(screen: str) -> bool:
    header = (screen.splitlines() or [""])[0].rstrip()
    return len(header) <= 120 and "baseline step 1" in header and "vllm-v1" in header


def _quit(t: Tmux) -> str:
    t.keys("q")
    t.wait_for("quit feedback", lambda s: "quitting" in s or "requests (" in s, 5)
    return " ".join(t.wait_for("the summary", lambda s: "report:" in s, 60).split())
