"""How much CPU the live monitor uses while it watches a saturated simulator.

Starts the simulator, saturates it with `infmon bench` from a separate process, and runs
`infmon monitor URL` (load paused: it only watches, scraping every second) in a real
pseudo-terminal of 160×48. After a warm-up it reads the monitor's CPU time from /proc over the
measured window and prints its share of one core; the target is under 10%.

    python bench/tui_cpu.py [--seconds 30] [--concurrency 256] [--drive N]

``--drive N`` also lets the monitor itself drive N streams (a heavier, different figure: the
load generator then shares the process with the UI).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infmon.sim.launch import SimulatorStartError, start_simulator, stop_process  # noqa: E402

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def infmon(*args: str) -> list[str]:
    return [sys.executable, "-m", "infmon", *args]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def server_load(session: Path) -> tuple[float, float]:
    """Median running and waiting requests the monitor saw: proof the server was saturated."""
    import statistics

    from infmon.journal import SessionReader, is_session_dir

    running, waiting = [], []
    for scrape in SessionReader(session).iter_scrapes() if is_session_dir(session) else []:
        snap = scrape.get("snap", {})
        running.append(snap.get("running") or 0.0)
        waiting.append(snap.get("waiting") or 0.0)
    if not running:
        return float("nan"), float("nan")
    return statistics.median(running), statistics.median(waiting)


def start_sim() -> tuple[subprocess.Popen[str], str]:
    try:
        return start_simulator(["--port", "0", "--scenario", "baseline"], cwd=REPO)
    except SimulatorStartError as exc:
        raise SystemExit(f"the simulator did not start: {exc}") from None


def start_in_pty(cmd: list[str], cols: int, rows: int) -> tuple[subprocess.Popen[bytes], int]:
    """Run ``cmd`` on a fresh pseudo-terminal of ``cols``×``rows`` and drain what it draws."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLORTERM": "", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)

    def drain() -> None:
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    return proc, master


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window (default 30)")
    parser.add_argument("--warmup", type=float, default=8.0, help="seconds before measuring")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=384,
        help="saturating load (default 384: above max_num_seqs, so requests queue)",
    )
    parser.add_argument("--drive", type=int, default=0, help="streams the monitor drives itself")
    parser.add_argument("--url", help="watch this running server instead of starting a simulator")
    args = parser.parse_args()

    sim, url = (None, args.url.rstrip("/")) if args.url else start_sim()
    tmp = tempfile.mkdtemp(prefix="infmon-tui-cpu-")
    load = app = None
    try:
        load = subprocess.Popen(
            infmon(
                "bench",
                url,
                "--concurrency",
                str(args.concurrency),
                "--step-duration",
                f"{args.warmup + args.seconds + 30:g}s",
                "--session-dir",
                f"{tmp}/load",
            ),
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cmd = infmon("monitor", url, "--scrape-interval", "1", "--session-dir", f"{tmp}/monitor")
        if args.drive:
            cmd += ["--concurrency", str(args.drive)]
        app, master = start_in_pty(cmd, 160, 48)
        time.sleep(args.warmup)
        if app.poll() is not None:
            raise SystemExit(f"the monitor exited early (code {app.returncode})")
        server_pid = sim.pid if sim is not None else None
        c0, t0 = cpu_seconds(app.pid), time.monotonic()
        s0 = cpu_seconds(server_pid) if server_pid else 0.0
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(app.pid), time.monotonic()
        s1 = cpu_seconds(server_pid) if server_pid else 0.0
        os.write(master, b"q")
        app.wait(timeout=30)
    finally:
        for proc in (app, load, sim):
            if proc is not None:
                stop_process(proc, 10)
    share = (c1 - c0) / (t1 - t0)
    running, waiting = server_load(Path(tmp) / "monitor")
    what = f"driving {args.drive} streams" if args.drive else "watching only (load paused)"
    server = f"simulator at {(s1 - s0) / (t1 - t0):.0%} of a core" if sim else "server"
    print(
        f"monitor CPU: {share:.1%} of one core over {t1 - t0:.0f} s, {what}, 160x48, "
        f"scrape 1 Hz, render <= 4 Hz; {server} under {args.concurrency} streams "
        f"(server median running {running:g}, waiting {waiting:g}) (target: monitor < 10%)"
    )
    return 0 if args.drive or share < 0.10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
