"""How late does a load thread wake on a busy host, at normal priority and in real time?

A load client sleeps between reads; when data arrives, what its timestamps are worth depends on
how soon it gets a core. This probe is that thread reduced to its core: it sleeps 2 ms, notes
how late it woke (``perf_counter``), ``--samples`` times, in a child process at normal priority
and in one at ``SCHED_RR`` 1 (what ``infmon.load.runtime.realtime_load_thread`` gives a load
worker), A-B-B-A, beside what keeps the host busy:

- ``--hogs N``: N spinning processes, each in its own session (its own scheduling group, as
  separate jobs are);
- ``--url URL``: ``infmon bench`` streaming from that server at ``--concurrency`` (default 16)
  for the whole measurement, as a vLLM on the same cores serves it.

    python bench/wakeup.py --hogs 4
    python scripts/real_servers.py serve-vllm &   # then, with the URL it prints:
    python bench/wakeup.py --url http://127.0.0.1:PORT

Prints p50/p90/p99/max lateness per run and the ratio of the p99s. Real time needs root,
``CAP_SYS_NICE`` or ``ulimit -r 1``: without it the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBE = """
import os, sys, time
if sys.argv[1] == "rt":
    os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(1))
late = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter()
    time.sleep(0.002)
    late.append((time.perf_counter() - t - 0.002) * 1e3)
late.sort()
q = lambda f: late[min(len(late) - 1, int(f * len(late)))]
print(q(0.5), q(0.9), q(0.99), late[-1])
"""


def probe(kind: str, samples: int) -> tuple[float, ...]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, kind, str(samples)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    return tuple(float(x) for x in out.split())


@contextlib.contextmanager
def busy(hogs: int, url: str | None, concurrency: int) -> Iterator[None]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "while True: pass"],
            start_new_session=True,
        )
        for _ in range(hogs)
    ]
    if url:
        tmp = Path(tempfile.mkdtemp(prefix="infmon-wakeup-"))
        cmd = [sys.executable, "-m", "infmon", "bench", url, "--concurrency", str(concurrency)]
        cmd += ["--prompt-tokens", "32", "--output-tokens", "32", "--endpoint", "completions"]
        cmd += ["--step-duration", "3600s", "--warmup", "0s", "--session-dir", str(tmp / "s")]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=tmp,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        time.sleep(10)  # the load streaming before the first probe
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=0)
    parser.add_argument("--url", help="a server to stream from with infmon bench meanwhile")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2, help="2: A-B-B-A (default)")
    args = parser.parse_args()
    try:
        probe("rt", 1)
    except subprocess.CalledProcessError:
        print("real time is not permitted here (root, CAP_SYS_NICE or `ulimit -r 1`)")
        return 2
    if not args.hogs and not args.url:
        parser.error("nothing keeps the host busy: give --hogs N and/or --url URL")
    runs: dict[str, list[tuple[float, ...]]] = {"normal": [], "rt": []}
    print(
        f"{os.cpu_count()} cores; busy: {args.hogs} hogs"
        + (f", infmon bench c={args.concurrency} against {args.url}" if args.url else "")
        + f"; a 2 ms sleep x {args.samples} per run; lateness in ms"
    )
    with busy(args.hogs, args.url, args.concurrency):
        for r in range(args.rounds):
            for kind in ("normal", "rt") if r % 2 == 0 else ("rt", "normal"):
                q = probe(kind, args.samples)
                runs[kind].append(q)
                print(
                    f"  {'SCHED_RR 1' if kind == 'rt' else 'normal':10s} p50 {q[0]:8.3f}  "
                    f"p90 {q[1]:8.3f}  p99 {q[2]:8.3f}  max {q[3]:8.2f}",
                    flush=True,
                )
    p99 = {k: sorted(q[2] for q in v) for k, v in runs.items()}
    print(
        f"p99 per run: normal {', '.join(f'{x:.2f}' for x in p99['normal'])}; "
        f"SCHED_RR 1 {', '.join(f'{x:.2f}' for x in p99['rt'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
