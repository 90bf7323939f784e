"""The monitor (``infmon URL`` in a real terminal, tmux) against hostile servers.

tmux is the terminal an attacker aims at: an OSC 0/2 would set its pane title, an OSC 52 (with
``set-clipboard on``) would write its paste buffer. Neither may happen; the hostile values must
show escaped (``\\x1b]0;…``) in the header / panes / events; a page that drips makes the server
show DOWN; ``q`` writes the report and a ``screenshot.svg`` that is valid XML and clean.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, poll_until
from tests.hostile.kit import assert_clean, clean_env
from tests.hostile.server import serve

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]
ESCAPED = "hostile\\x1b]0;PWNED-TITLE"


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def run(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=20,
        )
        return out.stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "tui", check=False)

    def wait_for(self, what: str, test: Callable[[str], bool], timeout_s: float = 40) -> str:
        deadline, screen = time.monotonic() + timeout_s, ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if test(screen):
                return screen
            time.sleep(0.3)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")


@contextmanager
def monitor(url: str, tmp_path: Path) -> Iterator[tuple[Tmux, Path]]:
    """``infmon URL --concurrency 1`` in a 160×48 tmux pane that accepts OSC 52 and titles."""
    t = Tmux(f"infmon-hostile-{os.getpid()}-{time.monotonic_ns()}")
    session = tmp_path / "session"
    env = " ".join(
        f"{k}={v!r}"
        for k, v in clean_env(tmp_path).items()
        if k in ("HOME", "XDG_CONFIG_HOME", "PATH")
    )
    cmd = " ".join(
        [
            *infmon_cmd(url, "--concurrency", "1", "--output-tokens", "8"),
            "--session-dir",
            str(session),
            "--scrape-interval",
            "0.5",
        ]
    )
    t.run(
        *("new-session", "-d", "-s", "tui", "-x", "160", "-y", "48", "-c", str(REPO)),
        f"env -u COLUMNS -u LINES {env} TERM=xterm-256color {cmd}; echo infmon-exit=$?",
        *(";", "set", "-g", "set-clipboard", "on", ";", "set", "-g", "remain-on-exit", "on"),
        # (env -u: pytest's COLUMNS=80 / LINES=24 would pin the app to 80×24)
    )
    size = t.run("display-message", "-p", "-t", "tui", "#{window_width}x#{window_height}")
    assert size.strip() == "160x48", size
    try:
        yield t, session
    finally:
        t.run("kill-server", check=False)


def _no_attack_landed(t: Tmux) -> None:
    title = t.run("display-message", "-p", "-t", "tui", "#{pane_title}")
    assert "PWNED" not in title, f"the pane title was set: {title!r}"
    buffers = t.run("list-buffers", check=False)
    assert "PWNED" not in buffers and buffers.strip() == "", f"OSC 52 wrote a buffer: {buffers!r}"


def _quit_and_check_screenshot(t: Tmux, session: Path) -> None:
    t.run("send-keys", "-t", "tui", "q")
    screen = t.wait_for("the monitor to quit", lambda s: "infmon-exit=" in s, timeout_s=60)
    assert "infmon-exit=0" in screen, screen
    svg = (session / "screenshot.svg").read_text(encoding="utf-8")
    ET.fromstring(svg)  # valid XML
    assert_clean(svg, "screenshot.svg")
    assert_clean((session / "report.md").read_text(encoding="utf-8"), "report.md")


@pytest.mark.parametrize(
    ("mode", "shows"),
    [
        ("escape-model", ESCAPED),  # the header's model name
        ("escape-metrics", ESCAPED),  # the header's version (from /version)
        ("escape-error", "errors 100%"),  # failures counted; their text is not shown
    ],
)
def test_hostile_text_shows_escaped_and_never_acts(tmp_path: Path, mode: str, shows: str) -> None:
    with serve(mode) as (url, server), monitor(url, tmp_path) as (t, session):
        screen = t.wait_for(f"{shows!r} on screen", lambda s: shows in s)
        assert_clean(screen, "the rendered screen")
        more = server.scrapes + 2  # a few more scrapes, and the repaints they bring
        poll_until(lambda: server.scrapes >= more, 30, "two more scrapes")
        _no_attack_landed(t)
        _quit_and_check_screenshot(t, session)
        _no_attack_landed(t)


def test_a_dripping_metrics_page_shows_the_server_down(tmp_path: Path) -> None:
    """The total deadline makes a scrape fail: the server pane says DOWN (never did before)."""
    with serve("drip-metrics") as (url, _), monitor(url, tmp_path) as (t, session):
        t.wait_for("DOWN", lambda s: "DOWN since" in s and "timeout" in s, timeout_s=40)
        _quit_and_check_screenshot(t, session)
