"""Is infmon's load client ever the bottleneck? infmon's driver against a minimal aiohttp client.

Starts ``infmon sim --trace-timing FILE`` pinned to one core, then for every concurrency runs the
same closed-loop workload (fixed prompt and output lengths) twice, each client in its own
subprocess pinned to the other core: (a) infmon's ``LoadDriver`` + ``StreamingClient`` recording
through the session journal, as ``infmon bench`` does, and (b) ``bench/reference_client.py``.
Each worker measures, over the same window after a warm-up: output tokens received per second, its
process CPU seconds per 1,000 tokens, and its event-loop lag p99 (one identical 20 ms probe in both).
The simulator's trace (when it handed each chunk to the socket, ``perf_counter`` = CLOCK_MONOTONIC,
the clock the clients read) is joined by ``X-Request-Id`` with the client's receive times: the
client-added delay to TTFT and to each chunk.

    python bench/client_overhead.py --quick      # ~2.5 minutes
    python bench/client_overhead.py              # the full table (README "Performance")
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

LISTEN_RE = re.compile(r"listening on (http://\S+)")
LAG_INTERVAL_S = 0.02
CLIENTS = ("infmon", "reference")
STRESS = ("--gpu", "H100-80GB", "--model", "Qwen/Qwen2.5-0.5B-Instruct")


# --------------------------------------------------------------------------- worker side


class LagProbe:
    """The same event-loop lag probe in both workers: how late a 20 ms sleep wakes up."""

    def __init__(self) -> None:
        self.lags_s: list[tuple[float, float]] = []

    async def run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(LAG_INTERVAL_S)
            t1 = time.perf_counter()
            self.lags_s.append((t1, max(0.0, t1 - t0 - LAG_INTERVAL_S)))

    def p99_ms(self, w0: float, w1: float) -> float:
        lags = [lag for t, lag in self.lags_s if w0 <= t <= w1]
        return float(np.percentile(lags, 99) * 1e3) if lags else math.nan


async def _window(args: argparse.Namespace) -> tuple[float, float, float]:
    """Sleep through warm-up and the measured window: (w0, w1, CPU seconds in between)."""
    await asyncio.sleep(args.warmup)
    w0, c0 = time.perf_counter(), time.process_time()
    await asyncio.sleep(args.duration)
    return w0, time.perf_counter(), time.process_time() - c0


async def _infmon_worker(args: argparse.Namespace) -> dict[str, Any]:
    from infmon.journal import JournalWriter
    from infmon.load.client import ClientParams, StreamingClient
    from infmon.load.driver import LoadDriver
    from infmon.load.prompts import Workload

    params = ClientParams(base_url=args.url, endpoint="completions",
                          max_connections=max(64, 2 * args.concurrency))
    client = StreamingClient(params)
    await client.resolve_model()
    await client.detect_capabilities()
    records: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        journal = JournalWriter(Path(tmp))

        def on_record(rec: Any) -> None:
            records.append(rec)
            journal.write_record(rec)

        workload = Workload(prompt_tokens=args.prompt_tokens,
                            output_tokens=(args.output_tokens, args.output_tokens), seed=0)
        driver = LoadDriver(client, workload, on_record)
        probe = asyncio.create_task(LAG.run())
        driver.start()
        driver.set_concurrency(args.concurrency)
        w0, w1, cpu_s = await _window(args)
        driver.pause()
        await driver.wait_idle(120)
        await driver.stop()
        probe.cancel()
        journal.close()
    await client.aclose()
    prefix = client.request_id_prefix
    reqs = [(f"{prefix}{r.request_id}", r.sent_s, list(r.chunk_times_s), r.output_tokens)
            for r in records if r.ok]
    return _result(args, w0, w1, cpu_s, reqs, sum(1 for r in records if not r.ok))


async def _reference_worker(args: argparse.Namespace) -> dict[str, Any]:
    from reference_client import RefRecord, run_reference

    records: list[RefRecord] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(LAG.run())
    load = asyncio.create_task(run_reference(args.url, args.model, args.concurrency, stop,
                                             args.prompt_tokens, args.output_tokens,
                                             f"ref-{os.getpid()}-", records))
    w0, w1, cpu_s = await _window(args)
    stop.set()  # workers finish their current request and send no more
    await load
    probe.cancel()
    reqs = [(r.request_id, r.sent_s, r.chunk_times_s, r.output_tokens) for r in records if r.ok]
    return _result(args, w0, w1, cpu_s, reqs, sum(1 for r in records if not r.ok))


LAG = LagProbe()


def _result(args: argparse.Namespace, w0: float, w1: float, cpu_s: float,
            reqs: list[tuple[str, float, list[float], int | None]], failed: int) -> dict[str, Any]:
    tokens = 0.0
    for _, _, times, out in reqs:
        if times:
            per_chunk = (out or len(times)) / len(times)
            tokens += per_chunk * sum(1 for t in times if w0 <= t <= w1)
    return {"window_s": w1 - w0, "cpu_s": cpu_s, "tokens": tokens, "lag_p99_ms": LAG.p99_ms(w0, w1),
            "failed": failed, "w0": w0, "w1": w1,
            "requests": [r for r in reqs if w0 <= r[1] <= w1]}


def worker_main(args: argparse.Namespace) -> None:
    if args.cpu >= 0:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, {args.cpu})
    if args.uvloop:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    run = _infmon_worker if args.worker == "infmon" else _reference_worker
    Path(args.out).write_text(json.dumps(asyncio.run(run(args))))


# --------------------------------------------------------------------------- orchestrator


def check_clock() -> float:
    """perf_counter in a child process vs this one: the offset in ms (must be ~0 to join traces)."""
    before = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "import time; print(repr(time.perf_counter()))"],
                         capture_output=True, text=True, check=True).stdout
    after = time.perf_counter()
    child = float(out)
    if not before <= child <= after:
        raise SystemExit(f"perf_counter differs across processes ({child} not in [{before}, {after}]): "
                         "server and client times cannot be joined on this OS")
    return (after - before) * 1e3


def start_sim(args: argparse.Namespace, trace: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "infmon", "sim", "--port", "0", "--scenario", args.scenario,
           "--trace-timing", str(trace), *args.sim_arg]

    def pin() -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, {args.server_cpu})

    proc = subprocess.Popen(cmd, cwd=args.sim_cwd or REPO, stdout=subprocess.PIPE, text=True,
                            preexec_fn=pin if args.server_cpu >= 0 else None,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdout is not None
    for line in proc.stdout:
        m = LISTEN_RE.search(line)
        if m:
            return proc, m.group(1)
    raise SystemExit("the simulator did not start: " + " ".join(cmd))


def run_worker(args: argparse.Namespace, url: str, model: str, client: str, c: int) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [sys.executable, __file__, "--worker", client, "--url", url, "--model", model,
               "--concurrency", str(c), "--warmup", str(args.warmup), "--duration", str(args.duration),
               "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.output_tokens),
               "--cpu", str(args.client_cpu), "--out", out.name] + (["--uvloop"] if args.uvloop else [])
        subprocess.run(cmd, check=True, cwd=REPO)
        return json.loads(Path(out.name).read_text())


def read_trace(path: Path) -> dict[str, tuple[float, list[float]]]:
    rows = {}
    with path.open() as f:
        for line in f:
            row = json.loads(line)
            if row.get("client_request_id"):
                rows[row["client_request_id"]] = (row["received_s"], row["chunks_s"])
    return rows


def delays(result: dict[str, Any], trace: dict[str, tuple[float, list[float]]]) -> dict[str, float]:
    """Client-added delay: TTFT (client TTFT − server TTFT) and per chunk (receive − write)."""
    ttft, first, chunk, joined = [], [], [], 0
    for rid, sent, times, _ in result["requests"]:
        srv = trace.get(rid)
        if srv is None or not times or len(srv[1]) != len(times):
            continue
        received, writes = srv
        joined += 1
        ttft.append((times[0] - sent) - (writes[0] - received))
        first.append(times[0] - writes[0])
        chunk.extend(t - w for t, w in zip(times, writes, strict=True))
    q = lambda a, p: float(np.percentile(a, p) * 1e3) if a else math.nan  # noqa: E731
    return {"joined": joined, "ttft_p50_ms": q(ttft, 50), "ttft_p99_ms": q(ttft, 99),
            "first_p50_ms": q(first, 50), "first_p99_ms": q(first, 99),
            "chunk_p50_ms": q(chunk, 50), "chunk_p99_ms": q(chunk, 99)}


def summary(result: dict[str, Any], trace: dict[str, tuple[float, list[float]]]) -> dict[str, float]:
    tokens = result["tokens"]
    return {"tok_s": tokens / result["window_s"],
            "cpu_per_1k": result["cpu_s"] / tokens * 1e3 if tokens else math.nan,
            "lag_p99_ms": result["lag_p99_ms"], "failed": result["failed"], **delays(result, trace)}


def sim_lag_p99_ms(url: str) -> float:
    """The simulator's own event-loop lag p99 since the last call (``/sim/stats``; nan if absent)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/sim/stats", timeout=10) as resp:
            p99 = json.load(resp)["loop_lag_ms"]["p99"]
    except (urllib.error.URLError, KeyError, ValueError):
        return math.nan
    return math.nan if p99 is None else float(p99)


def sim_model(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url + "/v1/models", timeout=10) as resp:
        return json.load(resp)["data"][0]["id"]


HEADER = (f"{'c':>5} {'client':>9} {'tok/s':>9} {'CPU s/1k tok':>12} {'lag p99 ms':>10} "
          f"{'TTFT+ p50/p99 ms':>17} {'1st+ p50/p99 ms':>17} {'chunk+ p50/p99 ms':>18} {'joined':>7} {'sim lag p99':>11}")


def row(c: int, name: str, s: dict[str, float]) -> str:
    return (f"{c:>5} {name:>9} {s['tok_s']:>9,.0f} {s['cpu_per_1k']:>12.4f} {s['lag_p99_ms']:>10.1f} "
            f"{s['ttft_p50_ms']:>8.2f}/{s['ttft_p99_ms']:<8.2f} {s['first_p50_ms']:>8.2f}/{s['first_p99_ms']:<8.2f}"
            f" {s['chunk_p50_ms']:>8.2f}/{s['chunk_p99_ms']:<9.2f}"
            f" {s['joined']:>7} {s['sim_lag_p99_ms']:>11.1f}")


def ratio_row(c: int, a: dict[str, float], b: dict[str, float]) -> str:
    return (f"{c:>5} {'ratio':>9} {a['tok_s'] / b['tok_s']:>9.2f} {a['cpu_per_1k'] / b['cpu_per_1k']:>12.2f}"
            f" {a['lag_p99_ms'] / b['lag_p99_ms'] if b['lag_p99_ms'] else math.nan:>10.2f}")


def main(args: argparse.Namespace) -> None:
    if args.quick:
        args.warmup, args.duration = 2.0, 5.0
    if args.stress:
        args.sim_arg = [*STRESS, *args.sim_arg]
    offset_ms = check_clock()
    print(f"clock: a child's perf_counter falls inside this process's bracket ({offset_ms:.1f} ms wide)")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"cores: sim on {args.server_cpu}, client on {args.client_cpu}")
    print(f"workload: completions, {args.prompt_tokens} prompt / {args.output_tokens} output tokens, "
          f"closed loop, warm-up {args.warmup:g} s, window {args.duration:g} s; sim {args.scenario} "
          + " ".join(args.sim_arg))
    results: dict[str, Any] = {"clock_bracket_ms": offset_ms, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.jsonl"
        proc, url = start_sim(args, trace_path)
        try:
            model = sim_model(url)
            print(HEADER, flush=True)
            for c in args.concurrency:
                got, sim_lag = {}, {}
                for name in CLIENTS:
                    sim_lag_p99_ms(url)  # resets the simulator's lag window
                    got[name] = run_worker(args, url, model, name, c)
                    sim_lag[name] = sim_lag_p99_ms(url)
                time.sleep(0.3)  # the trace line is written when a request finishes
                trace = read_trace(trace_path)
                s = {name: {**summary(got[name], trace), "sim_lag_p99_ms": sim_lag[name]} for name in CLIENTS}
                for name in CLIENTS:
                    print(row(c, name, s[name]), flush=True)
                print(ratio_row(c, s["infmon"], s["reference"]), flush=True)
                results["rows"].append({"concurrency": c, **s})
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="2 s warm-up + 5 s window per run (< 3 minutes)")
    p.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")],
                   default=[1, 16, 64, 256, 1024])
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--scenario", default="baseline")
    p.add_argument("--stress", action="store_true",
                   help="a much faster server (0.5B model on an H100: ~2,000 tok/s per stream) to find the client's ceiling")
    p.add_argument("--sim-arg", action="append", default=[],
                   help="extra simulator argument (repeatable, e.g. --sim-arg=--gpu --sim-arg=H100-80GB)")
    p.add_argument("--sim-cwd", help="checkout whose `python -m infmon sim` runs (default: this one)")
    p.add_argument("--server-cpu", type=int, default=0, help="core for the simulator (-1: no pinning)")
    p.add_argument("--client-cpu", type=int, default=1, help="core for each client (-1: no pinning)")
    p.add_argument("--uvloop", action="store_true", help="run both clients on uvloop")
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    p.add_argument("--worker", choices=CLIENTS, help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--cpu", type=int, default=-1, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        args.concurrency = args.concurrency[0]
    return args


if __name__ == "__main__":
    a = parse_args()
    worker_main(a) if a.worker else main(a)
