"""Does the live monitor measure what `infmon bench` measures? Same simulator, same load.

For each concurrency (default 1, 16, 256) it runs, interleaved A-B-B-A, `infmon bench` (one
step) and the live monitor (`infmon URL --concurrency C`, drawing every pane at 200×60 in a
real pseudo-terminal, quit with `q` after the same warm-up and measured time). Both run on the
same core (the simulator on the other), and both sessions' steps are read back from their
``report.json``. It prints each run, then monitor ÷ bench for TTFT, TPOT and ITL p50/p99 and
output tok/s, and the load worker's event-loop lag p99 while the UI renders (target < 5 ms at
the highest concurrency). The monitor's step ends with a pause (its requests then finish, as
bench drains a step) before `q`. ``--big-page`` also runs the monitor against a ``/metrics`` page of
50 MB (a test server in front of the simulator): the worker's loop lag may move < 2 ms.

    python bench/monitor_truth.py [--levels 1,16,256] [--seconds 20] [--big-page]

Exit status 1 when a ratio is outside its band (p50 ±5 %, p99 ±10 %, tok/s ±3 %).
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
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.tui_cpu import infmon, start_in_pty  # noqa: E402
from infmon.sim.launch import start_simulator, stop_process  # noqa: E402

FIGURES = (
    ("ttft_ms", "p50", 0.05),
    ("ttft_ms", "p99", 0.10),
    ("tpot_ms", "p50", 0.05),
    ("tpot_ms", "p99", 0.10),
    ("itl_ms", "p50", 0.05),
    ("itl_ms", "p99", 0.10),
)
TOKS_BAND = 0.03
CLIENT_CPU = "1"
SERVER_CPU = "0"


def pinned(cmd: list[str], cpu: str) -> list[str]:
    return ["taskset", "-c", cpu, *cmd] if os.cpu_count() and os.cpu_count() > 1 else cmd


def step_of(session: Path, level: int) -> dict:
    doc = json.loads((session / "report.json").read_text())
    steps = [s for s in doc["steps"] if s.get("concurrency") == level]
    if not steps:
        raise SystemExit(f"{session}: no step at c={level}")
    return max(steps, key=lambda s: s["completed"])


def run_bench(url: str, level: int, seconds: float, warmup: float, out: Path) -> dict:
    cmd = infmon(
        "bench",
        url,
        "--concurrency",
        str(level),
        "--step-duration",
        f"{seconds:g}s",
        "--warmup",
        f"{warmup:g}s",
        "--session-dir",
        str(out),
    )
    subprocess.run(pinned(cmd, CLIENT_CPU), cwd=REPO, check=True, capture_output=True, timeout=600)
    return step_of(out, level)


def run_monitor(
    url: str, level: int, seconds: float, warmup: float, out: Path, metrics_url: str | None = None
) -> dict:
    cmd = infmon(
        url,
        "--concurrency",
        str(level),
        "--step-duration",
        f"{seconds:g}s",
        "--warmup",
        f"{warmup:g}s",
        "--session-dir",
        str(out),
    )
    if metrics_url:
        cmd += ["--metrics-url", metrics_url]
    proc, master = start_in_pty(pinned(cmd, CLIENT_CPU), 200, 60)
    try:
        # the worker starts and finds the model (~1 s); the step runs warm-up + measured time
        time.sleep(1.5 + warmup + seconds)
        if proc.poll() is not None:
            raise SystemExit(f"the monitor exited early ({proc.returncode})")
        # pause (the step's measured time ends, as bench's does), let its requests finish as
        # bench drains them, then quit: a quit with streams in flight would cancel the slowest
        os.write(master, b" ")
        time.sleep(max(4.0, 0.04 * level))
        os.write(master, b"q")
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return step_of(out, level)


def big_page_server(upstream: str, megabytes: float) -> tuple[ThreadingHTTPServer, str]:
    """``/metrics``: the simulator's own page, padded to ``megabytes`` with extra series."""
    import httpx

    line = 'infmon_padding_total{series="%07d",pad="xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"} 1\n'
    padding = "".join(line % i for i in range(int(megabytes * 1e6 / len(line % 0))))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            page = httpx.get(upstream + "/metrics").text + padding
            body = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(ConnectionError):  # the client stops reading at its cap
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/metrics"


def show(name: str, s: dict) -> str:
    return (
        f"{name:8} tok/s {s['output_throughput_tok_s']:9.1f}  TTFT {s['ttft_ms']['p50']:7.2f}/"
        f"{s['ttft_ms']['p99']:7.2f}  TPOT {s['tpot_ms']['p50']:6.2f}/{s['tpot_ms']['p99']:6.2f}"
        f"  ITL {s['itl_ms']['p50']:6.2f}/{s['itl_ms']['p99']:6.2f}  lag p99 "
        f"{s['loop_lag_p99_ms']:.2f} ms  n={s['completed']}"
    )


def compare(level: int, bench: list[dict], monitor: list[dict]) -> tuple[list[str], bool]:
    ok, lines = True, []

    def mean(runs: list[dict], key: str, sub: str | None = None) -> float:
        return statistics.fmean(r[key][sub] if sub else r[key] for r in runs)

    parts = []
    for key, q, band in FIGURES:
        ratio = mean(monitor, key, q) / mean(bench, key, q)
        good = abs(ratio - 1) <= band
        ok &= good
        parts.append(f"{key[:-3]} {q} {ratio:.3f}{'' if good else ' ✗'}")
    ratio = mean(monitor, "output_throughput_tok_s") / mean(bench, "output_throughput_tok_s")
    good = abs(ratio - 1) <= TOKS_BAND
    ok &= good
    parts.append(f"tok/s {ratio:.3f}{'' if good else ' ✗'}")
    lines.append(f"c={level:<5} monitor ÷ bench: " + "  ".join(parts))
    return lines, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", default="1,16,256")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--big-page", action="store_true", help="also the 50 MB /metrics run")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="infmon-truth-"))
    print(
        f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; "
        f"simulator on CPU {SERVER_CPU}, clients on CPU {CLIENT_CPU}"
    )
    sim, url = start_simulator(["--port", "0", "--scenario", "baseline"], cwd=REPO)
    subprocess.run(["taskset", "-pc", SERVER_CPU, str(sim.pid)], capture_output=True)
    all_ok, summary = True, []
    try:
        for level in levels:
            bench, monitor = [], []
            for n, who in enumerate(("bench", "monitor", "monitor", "bench")):
                out = tmp / f"c{level}-{n}-{who}"
                run = run_bench if who == "bench" else run_monitor
                step = run(url, level, args.seconds, args.warmup, out)
                (bench if who == "bench" else monitor).append(step)
                print(f"c={level:<5} {show(who, step)}")
            lines, ok = compare(level, bench, monitor)
            summary += lines
            all_ok &= ok
        lag = statistics.fmean(s["loop_lag_p99_ms"] for s in monitor)
        summary.append(
            f"load worker loop lag p99 at c={levels[-1]} while the UI renders "
            f"200×60: {lag:.2f} ms (target < 5)"
        )
        all_ok &= lag < 5.0
        if args.big_page:
            server, page_url = big_page_server(url, 50.0)
            try:
                big = run_monitor(
                    url,
                    levels[-1],
                    args.seconds,
                    args.warmup,
                    tmp / "big-page",
                    metrics_url=page_url,
                )
            finally:
                server.shutdown()
            print(f"c={levels[-1]:<5} {show('50MB pg', big)}")
            moved = big["loop_lag_p99_ms"] - lag
            summary.append(
                f"with a 50 MB /metrics page: worker loop lag p99 "
                f"{big['loop_lag_p99_ms']:.2f} ms ({moved:+.2f} ms; target < 2)"
            )
            all_ok &= moved < 2.0
    finally:
        stop_process(sim)
    print("\n".join(summary))
    print("all within their bands" if all_ok else "OUT OF BAND")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
