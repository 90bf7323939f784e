"""`infmon demo` names the same knee for the same reason, run after run, in tmux and in the
browser (issue 26, finding 2 and must show 2).

Each run: the demo with no key pressed until its sweep stops (the journal's ``sweep stopped:
knee at c=N (reason)``, the knee pane's ``knee c=N`` on screen), within 120 s of launch; then
``q`` and its report names the same knee. Across runs the knee and the kind of reason
(``max_num_seqs``, ``KV cache``, ``throughput``) are the same. Both tests are marked ``long`` (two
tmux runs take ~3 min, the browser's one tmux and two `infmon serve` runs ~5: together more than
CI's 40 minutes allow beside the rest; ``tests/e2e/test_tmux_demo_knee.py`` keeps a demo's knee
within 90 s in CI): ``scripts/demo_knee_runs.sh`` runs them with the 5 of the issue
(``INFMON_DEMO_RUNS=5``).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, infmon_cmd, system_tool
from tests.e2e.test_tmux_demo import Tmux, sim_processes

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install tmux)"),
]

RUNS = int(os.environ.get("INFMON_DEMO_RUNS", "2"))
WITHIN_S = 120.0
STOPPED = re.compile(r"sweep stopped: knee at c=(\d+) \((.*)\); holding c=\d+")
KNEE_ON_SCREEN = re.compile(r"│ knee (?:≈ )?c=(\d+)")


@dataclass(frozen=True)
class Verdict:
    knee: int
    reason: str
    took_s: float
    report_knee: int | None
    report_reason: str

    @property
    def kind(self) -> str:
        return reason_kind(self.reason)


def reason_kind(reason: str) -> str:
    """The knee's reason without its figures: what limited the server."""
    for kind in ("max_num_seqs", "KV cache full", "throughput"):
        if kind in reason:
            return kind
    return reason


def sweep_verdict(session: Path) -> tuple[int, str] | None:
    """The journal's ``sweep stopped: knee at c=N (reason)``, once written (None before)."""
    db = session / "journal.sqlite"
    if not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1.0) as c:
            rows = c.execute("select event from events where kind = 'sweep'").fetchall()
    except sqlite3.Error:
        return None
    for (event,) in rows:
        m = STOPPED.match(json.loads(event).get("note", ""))
        if m:
            return int(m.group(1)), m.group(2)
    return None


def wait_verdict(session: Path, started: float, alive) -> tuple[int, str, float]:
    while time.monotonic() - started < WITHIN_S + 60:
        found = sweep_verdict(session)
        if found is not None:
            return found[0], found[1], time.monotonic() - started
        assert alive(), "the demo ended before its sweep stopped"
        time.sleep(0.5)
    raise AssertionError(f"no sweep verdict within {WITHIN_S + 60:.0f} s")


def report_knee(session: Path, deadline_s: float = 90.0) -> tuple[int | None, str]:
    path = session / "report.json"
    end = time.monotonic() + deadline_s
    while not path.exists() and time.monotonic() < end:
        time.sleep(0.5)
    knee = json.loads(path.read_text()).get("knee") or {}
    return knee.get("concurrency"), str(knee.get("reason", ""))


def demo_in_tmux(tmp: Path) -> Verdict:
    seed = str(random.randint(100_000, 999_999))
    session = tmp / "session"
    command = " ".join(
        [*infmon_cmd("demo"), "--session-dir", str(session), f"--sim-arg=--seed={seed}"]
    )
    t = Tmux(f"infmon-demo-same-{os.getpid()}-{seed}", "demo")
    started = time.monotonic()
    t.run(
        "new-session", "-d", "-s", "demo", "-x", "120", "-y", "40", "-c", str(REPO),
        f"env -u COLUMNS -u LINES TERM=xterm-256color {command}; sleep 90",
    )  # fmt: skip
    try:
        knee, reason, took = wait_verdict(session, started, t.alive)
        screen = t.wait_for("the knee pane", lambda s: KNEE_ON_SCREEN.search(s) is not None, 10)
        on_screen = int(KNEE_ON_SCREEN.search(screen).group(1))
        assert on_screen == knee, screen
        t.keys("q")
        rk, rr = report_knee(session)
    finally:
        t.run("kill-server", check=False)
        for pid in sim_processes(f"--seed={seed}"):
            os.kill(pid, 9)
    return Verdict(knee, reason, took, rk, rr)


def demo_in_browser(tmp: Path) -> Verdict:
    from tests.e2e.conftest import free_port
    from tests.e2e.test_serve_chromium import _printed_url, _wait_http

    chromium = system_tool("chromium")
    pytest.importorskip("textual_serve", reason="infmon serve needs textual-serve")
    port, devtools = free_port(), free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    session = tmp / "session"
    argv = ["serve", "--listen", f"127.0.0.1:{port}", "demo", "--session-dir", str(session)]
    banner = tmp / "serve.log"
    started = time.monotonic()
    serve = subprocess.Popen(
        [sys.executable, "-m", "infmon", *argv], cwd=REPO, stdout=banner.open("wb"),
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    chrome = None
    try:
        page = _printed_url(banner, 30)
        _wait_http(page, 30)
        flags = [
            "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--remote-debugging-port={devtools}", f"--user-data-dir={tmp / 'profile'}",
        ]  # fmt: skip
        chrome = subprocess.Popen(
            [chromium, *flags, page], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        knee, reason, took = wait_verdict(session, started, lambda: serve.poll() is None)
    finally:
        for proc in (chrome, serve):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, 15)  # the monitor behind the page quits and writes its report
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, 9)
    rk, rr = report_knee(session, 30.0)
    return Verdict(knee, reason, took, rk, rr)


def check_same(verdicts: list[Verdict]) -> None:
    for v in verdicts:
        print(f"knee c={v.knee} ({v.reason}) after {v.took_s:.0f} s; report c={v.report_knee}")
    first = verdicts[0]
    for v in verdicts:
        assert v.took_s <= WITHIN_S, v
        assert (v.report_knee, reason_kind(v.report_reason)) == (v.knee, v.kind), v
        assert (v.knee, v.kind) == (first.knee, first.kind), verdicts


@pytest.mark.timeout(60 + RUNS * (WITHIN_S + 60))  # each run: its 120 s, a stop and a report
def test_the_demo_names_the_same_knee_for_the_same_reason_run_after_run(tmp_path) -> None:
    check_same([demo_in_tmux(tmp_path / f"run{i}") for i in range(RUNS)])


def test_the_browser_names_the_tmux_knee(tmp_path) -> None:
    tmux = demo_in_tmux(tmp_path / "tmux")
    browser = [demo_in_browser(tmp_path / f"browser{i}") for i in range(2)]
    check_same([tmux, *browser])
