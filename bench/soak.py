"""Soak: `infmon bench` at 200 streams against the simulator for 20 minutes; RSS must stay flat.

Runs the real command (one-minute steps, so a step's records are released as each step ends;
everything else goes to the session record on disk) and samples its resident set size from
``/proc/PID/status`` every few seconds while the load runs (the final report rebuild is left
out). After the warm-up (the first 2 minutes, or a fifth of a
shorter run) RSS may grow by less than ``--limit-mb`` (50 MB). Prints the figure; exit 1 if over.

    python bench/soak.py                 # the full 20 minutes
    python bench/soak.py --minutes 5     # shorter
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import infmon_cmd, running_sim  # noqa: E402


def rss_mb(pid: int) -> float | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    m = re.search(r"VmRSS:\s+(\d+) kB", text)
    return int(m.group(1)) / 1024 if m else None


def soak(minutes: float, streams: int, sample_s: float, session: Path) -> list[tuple[float, float]]:
    """Run bench; return (elapsed s, RSS MB) samples."""
    step_s = min(60.0, minutes * 60)
    steps = max(1, round(minutes * 60 / step_s))
    levels = ",".join([str(streams)] * steps)
    samples: list[tuple[float, float]] = []
    with running_sim("--scenario", "baseline", "--seed", "3") as url:
        cmd = infmon_cmd(
            "bench",
            url,
            "--concurrency",
            levels,
            "--step-duration",
            f"{step_s:g}",
            "--warmup",
            "2",
            "--output-tokens",
            "64-256",
            "--prompt-tokens",
            "64",
            "--session-dir",
            str(session),
        )
        proc = subprocess.Popen(
            cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        t0 = time.monotonic()
        try:
            while proc.poll() is None:
                value = rss_mb(proc.pid)
                if value is not None:
                    samples.append((time.monotonic() - t0, value))
                time.sleep(sample_s)
        finally:
            if proc.poll() is None:
                proc.terminate()
            out = proc.communicate(timeout=60)[0]
        print(out, end="")
        if proc.returncode not in (0, 1):
            raise SystemExit(f"bench failed with status {proc.returncode}")
    return samples


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--streams", type=int, default=200)
    p.add_argument("--limit-mb", type=float, default=50.0)
    p.add_argument("--sample-s", type=float, default=5.0)
    a = p.parse_args()
    warmup_s = min(120.0, a.minutes * 60 / 5)
    with tempfile.TemporaryDirectory(prefix="infmon-soak-") as tmp:
        samples = soak(a.minutes, a.streams, a.sample_s, Path(tmp) / "session")
        from infmon.journal import SessionReader

        records = SessionReader(Path(tmp) / "session").record_count()
    load_s = a.minutes * 60 + 2.0 * max(
        1, round(a.minutes)
    )  # steps and their warm-ups, not the final report
    for minute in range(int(load_s // 60) + 1):
        at = [mb for t, mb in samples if minute * 60 <= t < (minute + 1) * 60]
        if at:
            print(f"soak: minute {minute:>2}: RSS {max(at):6.1f} MB")
    after = [mb for t, mb in samples if warmup_s <= t <= load_s]
    if len(after) < 2:
        print("soak: too few samples after warm-up")
        return 1
    base, peak, last = after[0], max(after), after[-1]
    growth = peak - base
    print(f"soak: {a.minutes:g} min at {a.streams} streams, {records} requests recorded")
    print(
        f"soak: RSS after warm-up {base:.1f} MB, peak {peak:.1f} MB, end {last:.1f} MB: "
        f"growth {growth:.1f} MB (limit {a.limit_mb:g} MB)"
    )
    return 0 if growth < a.limit_mb else 1


if __name__ == "__main__":
    raise SystemExit(main())
