"""Soak: the live monitor (or `infmon bench`) holding load on the simulator; memory stays flat.

Default: `infmon URL --concurrency 64` in a real pseudo-terminal of 160×48 for 20 minutes,
every pane drawing. It samples the resident set size of the monitor process and of its load
worker process (``/proc/PID/status``) every few seconds and their CPU time, and prints, per
minute, both RSS figures and both CPU shares of one core. After the warm-up (the first 2
minutes, or a fifth of a shorter run) the RSS of each may grow by less than ``--limit-mb``
(20 MB), and the CPU share of the last minutes must stay within 1.5× that of the first
measured minute. Exit 1 when either fails. ``--client bench`` soaks `infmon bench` instead
(one-minute steps at ``--streams``).

    python bench/soak.py                           # the monitor, 20 minutes at c=64
    python bench/soak.py --minutes 5               # shorter
    python bench/soak.py --client bench --streams 200
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.tui_cpu import cpu_seconds, start_in_pty  # noqa: E402
from tests.conftest import infmon_cmd, running_sim  # noqa: E402


def rss_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) / 1024 if m else None


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def worker_of(pid: int, timeout_s: float = 30.0) -> int | None:
    """The load worker process (``infmon.engine.worker``) under ``pid``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        todo = children(pid)
        while todo:
            child = todo.pop()
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"infmon.engine.worker" in argv:
                return child
            todo += children(child)
        time.sleep(0.2)
    return None


Sample = tuple[float, float, float, float, float]
"""(elapsed s, monitor RSS MB, worker RSS MB, monitor CPU s, worker CPU s)."""


def sample_loop(proc: subprocess.Popen, end_s: float, every_s: float) -> list[Sample]:
    worker = worker_of(proc.pid)
    if worker is None:
        raise SystemExit("no load worker process found")
    samples: list[Sample] = []
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < end_s:
        a, b = rss_mb(proc.pid), rss_mb(worker)
        if a is not None and b is not None:
            samples.append(
                (time.monotonic() - t0, a, b, cpu_seconds(proc.pid), cpu_seconds(worker))
            )
        time.sleep(every_s)
    return samples


def soak_monitor(url: str, minutes: float, streams: int, every_s: float, tmp: Path) -> list[Sample]:
    cmd = infmon_cmd(
        url,
        "--concurrency",
        str(streams),
        "--step-duration",
        "60",
        "--output-tokens",
        "64-256",
        "--prompt-tokens",
        "64",
        "--session-dir",
        str(tmp / "session"),
    )
    proc, master = start_in_pty(cmd, 160, 48)
    try:
        samples = sample_loop(proc, minutes * 60, every_s)
        os.write(master, b"q")
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return samples


def soak_bench(url: str, minutes: float, streams: int, every_s: float, tmp: Path) -> list[Sample]:
    steps = max(1, round(minutes))
    cmd = infmon_cmd(
        "bench",
        url,
        "--concurrency",
        ",".join([str(streams)] * steps),
        "--step-duration",
        "60",
        "--warmup",
        "2",
        "--output-tokens",
        "64-256",
        "--prompt-tokens",
        "64",
        "--session-dir",
        str(tmp / "session"),
    )
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        return sample_loop(proc, minutes * 60, every_s)
    finally:
        proc.wait(timeout=600)


def per_minute(samples: list[Sample]) -> list[tuple[int, float, float, float, float]]:
    """(minute, monitor RSS max, worker RSS max, monitor CPU share, worker CPU share)."""
    out = []
    for minute in range(int(samples[-1][0] // 60) + 1):
        at = [s for s in samples if minute * 60 <= s[0] < (minute + 1) * 60]
        if len(at) < 2:
            continue
        span = at[-1][0] - at[0][0]
        out.append(
            (
                minute,
                max(s[1] for s in at),
                max(s[2] for s in at),
                (at[-1][3] - at[0][3]) / span,
                (at[-1][4] - at[0][4]) / span,
            )
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--client", choices=("monitor", "bench"), default="monitor")
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--streams", type=int, default=64)
    p.add_argument("--limit-mb", type=float, default=20.0)
    p.add_argument("--sample-s", type=float, default=5.0)
    a = p.parse_args()
    warmup_s = min(120.0, a.minutes * 60 / 5)
    run = soak_monitor if a.client == "monitor" else soak_bench
    with (
        tempfile.TemporaryDirectory(prefix="infmon-soak-") as tmp,
        running_sim("--scenario", "baseline", "--seed", "3") as url,
    ):
        samples = run(url, a.minutes, a.streams, a.sample_s, Path(tmp))
        from infmon.journal import SessionReader

        records = SessionReader(Path(tmp) / "session").record_count()
    rows = per_minute(samples)
    for minute, rss, wrss, cpu, wcpu in rows:
        print(
            f"soak: minute {minute:>2}: {a.client} RSS {rss:6.1f} MB, CPU {cpu:5.1%} of a core"
            f" · worker RSS {wrss:6.1f} MB, CPU {wcpu:5.1%}"
        )
    after = [s for s in samples if s[0] >= warmup_s]
    if len(after) < 2 or len(rows) < 3:
        print("soak: too few samples after warm-up")
        return 1
    ok = True
    for name, k in ((a.client, 1), ("worker", 2)):
        base, peak = after[0][k], max(s[k] for s in after)
        print(
            f"soak: {name} RSS after warm-up {base:.1f} MB, peak {peak:.1f} MB: growth "
            f"{peak - base:.1f} MB (limit {a.limit_mb:g} MB)"
        )
        ok &= peak - base < a.limit_mb
    measured = [r for r in rows if r[0] * 60 >= warmup_s]
    first, last = measured[0][3] + measured[0][4], measured[-1][3] + measured[-1][4]
    print(
        f"soak: CPU of both processes: {first:.1%} in minute {measured[0][0]}, {last:.1%} in "
        f"minute {measured[-1][0]} (ratio {last / first:.2f}, limit 1.5)"
    )
    ok &= last / first < 1.5
    print(f"soak: {a.minutes:g} min at {a.streams} streams, {records} requests recorded")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
