"""Does this host's CPU run at one speed? A fixed unit of pure-Python work, timed in CPU time.

A virtual machine's cores can slow down under load that its guest cannot see: another tenant on
the same physical core (its SMT sibling), the host's frequency, memory bandwidth. The guest's
steal time counts only the time its vCPU did not run at all; a vCPU that runs slower is charged
as if it ran at full speed. Timing one fixed unit of work in the thread's own CPU time
(``time.thread_time``) reads that speed directly: waiting for a core is not in it, so the same
unit taking longer means the core did less work per second.

Each probe is one process pinned to one core, running the unit every ``--every`` seconds (about
4 ms of CPU each, so under 1% of a core at the default). It prints, per core: the unit's CPU time
at p10 / p50 / p90, the slowest over the fastest decile (``p90 / p10``), and the machine's steal
over the same window from ``/proc/stat``.

With ``--session DIR -- COMMAND ...`` it probes while ``COMMAND`` runs (an ``infmon bench`` that
records into ``DIR``), then joins each of the session's steps with the probes inside its
measured time: the step's TPOT (the client's, and the server's own per-request TPOT when vLLM
gives it) beside the unit's median CPU time on each core, and the Pearson correlation between
the two over the steps. A server sharing this host whose TPOT moves with the unit moves with
the host's speed, not with the load or the client.

    python bench/host_pace.py --seconds 60                       # the host as it is, idle
    python bench/host_pace.py --session /tmp/s -- infmon bench URL --concurrency 1 \\
        --step-duration 5s --repeat 18 --session-dir /tmp/s      # beside a real server

README ("Fitted to your own server", the real vLLM) cites its figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

UNIT = 60_000
"""Iterations of the unit: about 4 ms of CPU on this project's VM at its faster speed."""


def unit() -> int:
    s = 0
    for i in range(UNIT):
        s += i * i
    return s


def probe(core: int, every_s: float, until_s: float, out: Path) -> None:
    """Run in a child: the unit on ``core`` every ``every_s`` until ``until_s`` (wall clock),
    each sample ``wall_time cpu_ms`` on a line of ``out``."""
    os.sched_setaffinity(0, {core})
    with out.open("w") as f:
        while time.time() < until_s:
            t = time.thread_time()
            unit()
            f.write(f"{time.time():.3f} {(time.thread_time() - t) * 1e3:.4f}\n")
            f.flush()
            time.sleep(every_s)


def steal_ticks() -> tuple[int, int]:
    """(steal, all) jiffies of the whole machine."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields[:8]]
    return ticks[7], sum(ticks)


def read_samples(path: Path) -> list[tuple[float, float]]:
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            out.append((float(parts[0]), float(parts[1])))
    return out


def describe(core: int, samples: list[tuple[float, float]]) -> str:
    ms = np.array([c for _, c in samples])
    if len(ms) < 10:
        return f"  core {core}: {len(ms)} samples, too few to say"
    p10, p50, p90 = np.percentile(ms, [10, 50, 90])
    return (
        f"  core {core}: {len(ms)} units, CPU ms p10 {p10:.2f} p50 {p50:.2f} p90 {p90:.2f}, "
        f"min {ms.min():.2f} max {ms.max():.2f}; p90 / p10 {p90 / p10:.2f}"
    )


def join_steps(session: Path, by_core: dict[int, list[tuple[float, float]]]) -> list[str]:
    """Each step of the session beside the probes inside its measured time, and r."""
    import json

    from infmon.commands.simfit_read import read_session

    doc = json.loads((session / "report.json").read_text())
    t0 = float(doc["session"]["started_wall_s"])
    spans = {
        int(s["step"]): (t0 + float(s["start_s"]), t0 + float(s["end_s"]))
        for s in doc["steps"]
        if s.get("end_s") is not None and not s.get("client_late")
    }
    obs, _ = read_session(session)
    pairs: dict[int, list[tuple[float, float]]] = {c: [] for c in by_core}
    lines = ["step  c   TPOT ms  server  " + "  ".join(f"core {c} ms (n)" for c in by_core)]
    steps = [int(s["step"]) for s in doc["steps"] if not s.get("client_late")]
    if len(steps) != len(obs):  # a step the fit could not read (no closed loop): no join
        return [f"{len(steps)} steps and {len(obs)} observations: cannot join them by order"]
    for step, o in zip(steps, obs, strict=True):
        lo, hi = spans.get(step, (0.0, 0.0))
        cells = []
        for c, v in by_core.items():
            inside = [ms for t, ms in v if lo < t < hi]
            if len(inside) < 2:  # a starved probe: its core's scheduler gave it no turn
                cells.append(f"{'-':>9} ({len(inside):>2})")
                continue
            cells.append(f"{statistics.median(inside):9.2f} ({len(inside):>2})")
            pairs[c].append((o.tpot_s, statistics.median(inside)))
        srv = f"{o.server_tpot_s * 1e3:6.2f}" if o.server_tpot_s == o.server_tpot_s else "     -"
        lines.append(
            f"{step:>4}  {o.concurrency:<2}  {o.tpot_s * 1e3:6.2f}  {srv}  {'  '.join(cells)}"
        )
    for c, xy in pairs.items():
        if len(xy) >= 3:
            r = np.corrcoef([x for x, _ in xy], [y for _, y in xy])[0, 1]
            lines.append(f"TPOT against core {c}'s unit over {len(xy)} steps: r = {r:.2f}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="probe this long (no command)")
    ap.add_argument("--every", type=float, default=0.5, help="seconds between units")
    ap.add_argument("--cores", default="", help="e.g. 0,1 (default: every core this may use)")
    ap.add_argument("--session", type=Path, help="the session COMMAND records, to join steps")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ... to probe beside")
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    cores = (
        [int(c) for c in args.cores.split(",") if c.strip()]
        if args.cores
        else sorted(os.sched_getaffinity(0))
    )
    tmp = Path(tempfile.mkdtemp(prefix="host-pace-"))
    horizon = time.time() + (24 * 3600 if cmd else args.seconds)
    s0 = steal_ticks()
    children = []
    for c in cores:
        pid = os.fork()
        if pid == 0:
            try:
                probe(c, args.every, horizon, tmp / f"core{c}.txt")
            finally:
                os._exit(0)
        children.append(pid)
    try:
        if cmd:
            rc = subprocess.run(cmd, check=False).returncode
            if rc:
                print(f"command exited {rc}", file=sys.stderr)
        else:
            time.sleep(args.seconds)
    finally:
        for pid in children:
            if cmd:
                os.kill(pid, 15)
            os.waitpid(pid, 0)
    s1 = steal_ticks()
    by_core = {c: read_samples(tmp / f"core{c}.txt") for c in cores}
    print(
        f"a fixed unit of pure-Python work ({UNIT:,} iterations), timed in the thread's CPU time:"
    )
    for c in cores:
        print(describe(c, by_core[c]))
    steal = (s1[0] - s0[0]) / max(1, s1[1] - s0[1])
    print(f"  steal over the window: {steal:.2%} of all CPU time")
    if args.session is not None:
        print("\n".join(join_steps(args.session, by_core)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
