"""What scraping ``/metrics`` during a run costs the server's latency.

``infmon bench`` scrapes the server once a second (and at each step's two edges) so every step
has the server's own figures; ``vllm bench serve`` does not scrape. Rendering vLLM's page takes
its API server a few milliseconds of CPU, spent while it streams. This script measures what that
does to the latencies: the same load (``--concurrency 4``, 40 requests of 32 prompt / 32 output
tokens, no warm-up) with the default scrape and with ``--no-server-metrics``, interleaved
A-B-B-A so a drift of the machine favours neither, and prints the medians of the per-run figures
and their ratio. On a 2-core machine the server's processes are pinned to CPU 0 and the client to
CPU 1 (as the real-server suite does).

    python bench/scrape_cost.py URL                # a vLLM you started, 8 runs each
    python bench/scrape_cost.py --start-vllm       # starts the real-server suite's CPU vLLM
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
LOAD = (
    "--prompt-tokens", "32", "--output-tokens", "32", "--concurrency", "4",
    "--step-requests", "40", "--step-duration", "300s", "--warmup", "0s",
)  # fmt: skip


def _run(url: str, tmp: Path, scrape: bool, prefix: list[str]) -> tuple[float, float]:
    out, session = tmp / "bench.json", tmp / "s"
    cmd = [*prefix, sys.executable, "-m", "infmon", "bench", url, *LOAD, "--json", str(out)]
    cmd += ["--session-dir", str(session)] + ([] if scrape else ["--no-server-metrics"])
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env=_env())
    if proc.returncode != 0:
        sys.exit(f"infmon bench failed:\n{proc.stderr[-2000:]}")
    step = json.loads(out.read_text())["steps"][0]
    subprocess.run(["rm", "-rf", str(session)], check=False)
    return float(step["ttft_ms"]["p50"]), float(step["tpot_ms"]["p50"])


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


@contextlib.contextmanager
def _vllm() -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "scripts" / "real_servers.py"), "serve-vllm"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**_env(), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "listening on " in line:
                yield line.split("listening on ")[1].split()[0], proc.pid
                return
        sys.exit("vLLM did not start (see ~/.cache/infmon/logs/vllm.log)")
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)


def _server_pids(url: str) -> list[int]:
    port = url.rsplit(":", 1)[1].strip("/")
    out = subprocess.run(["ss", "-ltnpH", f"sport = :{port}"], capture_output=True, text=True)
    pids = {int(p.split("=")[1]) for p in out.stdout.replace(",", " ").split() if "pid=" in p}
    if not pids:
        return []
    tree = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    parent = {int(a): int(b) for a, b in (ln.split() for ln in tree.splitlines())}
    top = set(pids)
    while True:  # the listening process, its parent (the launcher) and every descendant
        more = {c for c, pp in parent.items() if pp in top} - top
        if not more:
            return sorted(top)
        top |= more


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url", nargs="?")
    ap.add_argument("--start-vllm", action="store_true")
    ap.add_argument("--runs", type=int, default=8, help="runs of each kind (default 8)")
    args = ap.parse_args()
    if not args.url and not args.start_vllm:
        ap.error("give a URL or --start-vllm")
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(_vllm())[0]
        prefix: list[str] = []
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) >= 2:
            for pid in _server_pids(url):
                subprocess.run(["taskset", "-a", "-p", "-c", str(cpus[0]), str(pid)],
                               capture_output=True, check=False)  # fmt: skip
            prefix = ["taskset", "-c", str(cpus[1])]
            print(f"server pinned to CPU {cpus[0]}, client to CPU {cpus[1]}")
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        _run(url, tmp, True, prefix)  # a discarded warm-up run
        got: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        t0 = time.monotonic()
        for i in range(args.runs):
            for scrape in (True, False) if i % 2 == 0 else (False, True):
                got[scrape].append(_run(url, tmp, scrape, prefix))
                ttft, tpot = got[scrape][-1]
                label = "scraped" if scrape else "no scrape"
                print(
                    f"  run {i + 1:2d} {label:9s} TTFT p50 {ttft:7.3f} ms  TPOT p50 {tpot:6.3f} ms"
                )
        print(f"{args.runs} runs each, A-B-B-A, {time.monotonic() - t0:.0f} s")
        for k, name in ((0, "median TTFT ms"), (1, "median TPOT ms")):
            a = statistics.median(r[k] for r in got[True])
            b = statistics.median(r[k] for r in got[False])
            print(f"  {name}: scraped {a:.3f}, not scraped {b:.3f}, ratio {a / b:.3f}")


if __name__ == "__main__":
    main()
