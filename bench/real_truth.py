"""How true are infmon's figures on a real vLLM that shares the client's cores? The server decides.

Starts the real-server suite's vLLM (``scripts/real_servers.py``: vLLM 0.32 on CPU, the tiny
model), nothing pinned, and runs the same load (``--prompt-tokens 32 --output-tokens 32``
with ``ignore_eos``, the same 32-token prompts) from each client at each concurrency,
A-B-B-A: infmon's default (``infmon bench``), ``infmon bench --in-process`` and
``vllm bench serve``; with ``--monitor`` the live monitor too (``infmon URL`` in tmux at
200×60, every pane drawing). The arbiter is the server's own ``vllm:time_to_first_token_seconds``
and ``vllm:request_time_per_output_token_seconds`` over each run's window (a client cannot see a
token before the server made it): per run, the client's mean TTFT minus the server's (what the
client added), the client's mean TPOT over the server's, output tok/s, and the client's output
tokens against the server's ``vllm:generation_tokens_total`` (less infmon's one-token probe).
Each run also says what it cost the host: a process in a session of its own sleeps 0.5 s in a loop
beside it, and the line gives how late it woke (p50, max). ``--clients default,high,vllm`` adds
``infmon bench --load-priority high`` (nice -20 in the fair class, never real time).

    python bench/real_truth.py [--levels 4,16] [--requests 320] [--rounds 2] [--monitor]
                               [--url URL] [--threads] [--before CHECKOUT]

Bounds (exit status 1 when missed): infmon's default (and the monitor) adds at most
``vllm bench serve``'s client-added TTFT + 1 ms (mean of the runs), TPOT ÷ server's within
0.97–1.03 or at least as close to 1 as ``vllm bench serve``'s (on a host loaded enough that the
server's own API process starves, the server's TPOT is late for every client), tokens equal to
the server's. ``--threads`` prints each client thread's CPU time and
run-queue wait (``/proc/PID/task/TID/schedstat``) per run. Hold ``/tmp/infmon-heavy.lock`` on a
shared machine (``flock /tmp/infmon-heavy.lock python bench/real_truth.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.real.harness import complete, rs  # noqa: E402
from tests.real.truth import (  # noqa: E402
    CLIENTS,
    TPOT_BAND,
    TTFT_SLACK_MS,
    Figures,
    RunSpec,
    measured,
    order,
    run_client,
    tpot_true,
)

SLEEPER = """
import sys, time
every = 0.5
t = time.monotonic()
while True:
    time.sleep(every)
    now = time.monotonic()
    print(f"{now - t - every:.4f}", flush=True)
    t = now
"""


@contextlib.contextmanager
def sleeper() -> Iterator[list[float]]:
    """A process in a session of its own (its own scheduling group, as another job on the host
    is) that sleeps 0.5 s in a loop; yields the list of how late each wake-up came, filled when
    the block ends: what a run costs the host's other processes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    late: list[float] = []
    try:
        yield late
    finally:
        proc.kill()
        out = proc.communicate()[0]
        late += [float(x) for x in out.split()]


def measure_level(spec: RunSpec, clients: list[str], rounds: int) -> dict[str, list[Figures]]:
    runs: dict[str, list[Figures]] = {c: [] for c in clients}
    for n, client in enumerate(order(clients, rounds)):
        with sleeper() as late:
            fig = measured(client, spec, spec.tmp / f"c{spec.concurrency}-{n}-{client}")
        runs[client].append(fig)
        woke = (
            f"; a sleeping process woke late by p50 {statistics.median(late):.3f} s, "
            f"max {max(late):.2f} s"
            if late
            else ""
        )
        print(f"  c={spec.concurrency:<3} {fig.line()}{woke}", flush=True)
        for line in fig.threads:
            print(f"        {line}")
    return runs


def verdict(level: int, runs: dict[str, list[Figures]]) -> tuple[list[str], bool]:
    """The table rows of one level and whether infmon's default (and monitor) met the bounds."""
    rows, ok = [], True
    ref = statistics.fmean(f.added_ttft_ms for f in runs["vllm"])
    ref_tpot = statistics.fmean(f.tpot_ratio for f in runs["vllm"])
    for client, figs in runs.items():
        added = statistics.fmean(f.added_ttft_ms for f in figs)
        tpot = statistics.fmean(f.tpot_ratio for f in figs)
        toks = statistics.fmean(f.tok_s for f in figs)
        equal = all(f.tokens_equal for f in figs)
        row = (
            f"| {level} | {CLIENTS[client]} | "
            + ", ".join(f"{f.added_ttft_ms:.1f}" for f in figs)
            + f" (mean {added:.1f}) | "
            + ", ".join(f"{f.tpot_ratio:.3f}" for f in figs)
            + f" (mean {tpot:.3f}) | {toks:,.0f} | {'equal' if equal else 'DIFFER'} |"
        )
        if client in ("default", "monitor"):
            good = added <= ref + TTFT_SLACK_MS and tpot_true(tpot, ref_tpot) and equal
            ok &= good
            row += "" if good else " ✗"
        rows.append(row)
    return rows, ok


@contextlib.contextmanager
def server(url: str | None, logs: Path) -> Iterator[str]:
    if url:
        yield url.rstrip("/")
        return
    with rs.serve_vllm(logs) as srv:
        yield srv.url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="4,16")
    parser.add_argument("--requests", type=int, default=320, help="per run (default 320)")
    parser.add_argument("--rounds", type=int, default=2, help="2: A-B-B-A (default)")
    parser.add_argument("--monitor", action="store_true", help="the live monitor as well")
    parser.add_argument("--clients", help="comma list of " + ",".join(CLIENTS))
    parser.add_argument("--url", help="a running vLLM serving tiny-gpt2 (default: start one)")
    parser.add_argument("--threads", action="store_true", help="per-thread schedstat per run")
    parser.add_argument(
        "--before",
        type=Path,
        help="another infmon checkout (e.g. `git worktree add /tmp/b COMMIT`): its default "
        "path runs as client `before`",
    )
    args = parser.parse_args()
    clients = (
        args.clients.split(",")
        if args.clients
        else ["default", "in-process", "vllm", *(["monitor"] if args.monitor else [])]
    ) + (["before"] if args.before and not args.clients else [])
    if "vllm" not in clients or not set(clients) <= set(CLIENTS):
        parser.error(f"--clients: some of {', '.join(CLIENTS)}, vllm (the reference) among them")
    tmp = Path(tempfile.mkdtemp(prefix="infmon-real-truth-"))
    rs.setup()
    prompts = rs.write_prompts(tmp / "prompts-32.jsonl", args.requests, 32)
    print(
        f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; nothing pinned; "
        f"{args.requests} requests per run, 32 in / 32 out, ignore_eos"
    )
    table, all_ok = [], True
    with server(args.url, tmp / "logs") as url:
        complete(url, "warm up", max_tokens=8)
        for level in (int(x) for x in args.levels.split(",")):
            spec = RunSpec(url, level, args.requests, prompts, tmp, args.threads, args.before)
            run_client("default", spec, tmp / f"c{level}-discarded")  # a new shape: slow batches
            rows, ok = verdict(level, measure_level(spec, clients, args.rounds))
            table += rows
            all_ok &= ok
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    print("| c | client | client-added TTFT, mean ms per run | TPOT ÷ server's | out tok/s "
          "| tokens vs server |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print("\n".join(table))
    print(
        f"bounds (infmon default, monitor): added TTFT <= vllm bench serve's + {TTFT_SLACK_MS} ms, "
        f"TPOT ratio {TPOT_BAND[0]}-{TPOT_BAND[1]} (or as close to 1 as vllm bench serve's), "
        f"tokens equal: {'met' if all_ok else 'MISSED'}"
    )
    print(json.dumps({"ok": all_ok, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}))
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
