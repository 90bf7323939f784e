"""Is infmon's load client ever the bottleneck? infmon's driver against a minimal aiohttp client.

Starts ``infmon sim --trace-timing FILE`` pinned to one core, then for every concurrency runs the
same closed-loop workload (fixed prompt and output lengths) twice, each client in its own
subprocess pinned to the other core: (a) infmon's ``LoadDriver`` + ``StreamingClient`` recording
through the session journal, as ``infmon bench`` does, and (b) ``bench/reference_client.py``.
Each worker measures, over the same window after a warm-up: output tokens received per second, its
process CPU seconds per 1,000 tokens, and its event-loop lag p99 (one identical 20 ms probe in both).
The simulator's trace (when it handed each chunk to the socket, ``perf_counter`` = CLOCK_MONOTONIC,
the clock the clients read) is joined by ``X-Request-Id`` with the client's receive times: the
client-added delay to TTFT and to each chunk. Both workers also note when each request's bytes were
handed to the socket (``SendTap``, in aiohttp's writer), which splits a request's TTFT exactly into
send+ (client) + srv-read + server TTFT (server) + 1st+ (client); the client-added delay to TTFT is
``client+`` = send+ + 1st+. Both clients run on uvloop, as ``infmon bench`` does (``--asyncio``:
asyncio's own loop for both).

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

from infmon.sim.trace import read_trace, settled  # noqa: E402

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


def _runq_wait_s() -> float:
    """How long this (loop) thread has waited, runnable, for a core other processes held
    (Linux ``/proc/thread-self/schedstat``; nan elsewhere)."""
    try:
        return int(Path("/proc/thread-self/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return math.nan


RUNQ: dict[str, float] = {}


async def _window(args: argparse.Namespace) -> tuple[float, float, float]:
    """Sleep through warm-up and the measured window: (w0, w1, CPU seconds in between)."""
    await asyncio.sleep(args.warmup)
    w0, c0, q0 = time.perf_counter(), time.process_time(), _runq_wait_s()
    await asyncio.sleep(args.duration)
    RUNQ["runq_wait_ms"] = (_runq_wait_s() - q0) * 1e3
    return w0, time.perf_counter(), time.process_time() - c0


async def _infmon_worker(args: argparse.Namespace) -> dict[str, Any]:
    from infmon.journal import JournalWriter
    from infmon.load.client import StreamingClient
    from infmon.load.driver import LoadDriver
    from infmon.load.params import ClientParams
    from infmon.load.workload.words import RandomWords as Workload

    params = ClientParams(
        base_url=args.url, endpoint="completions", max_connections=max(64, 2 * args.concurrency)
    )
    client = StreamingClient(params)
    await client.resolve_model()
    await client.detect_capabilities()
    records: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        journal = None if args.no_journal else JournalWriter(Path(tmp))

        def on_record(rec: Any) -> None:
            records.append(rec)
            if journal is not None:
                journal.write_record(rec)

        workload = Workload(
            prompt_tokens=args.prompt_tokens,
            output_tokens=(args.output_tokens, args.output_tokens),
            seed=0,
        )
        driver = LoadDriver(client, workload, on_record)
        probe = asyncio.create_task(LAG.run())
        driver.start()
        driver.set_concurrency(args.concurrency)
        w0, w1, cpu_s = await _window(args)
        driver.pause()
        await driver.wait_idle(120)
        await driver.stop()
        probe.cancel()
        if journal is not None:
            journal.close()
    await client.aclose()
    prefix = client.request_id_prefix
    reqs = [
        (f"{prefix}{r.request_id}", r.sent_s, list(r.chunk_times_s), r.output_tokens)
        for r in records
        if r.ok
    ]
    return _result(args, w0, w1, cpu_s, reqs, sum(1 for r in records if not r.ok))


async def _reference_worker(args: argparse.Namespace) -> dict[str, Any]:
    from reference_client import RefRecord, run_reference

    records: list[RefRecord] = []
    stop = asyncio.Event()
    probe = asyncio.create_task(LAG.run())
    load = asyncio.create_task(
        run_reference(
            args.url,
            args.model,
            args.concurrency,
            stop,
            args.prompt_tokens,
            args.output_tokens,
            f"ref-{os.getpid()}-",
            records,
        )
    )
    w0, w1, cpu_s = await _window(args)
    stop.set()  # workers finish their current request and send no more
    await load
    probe.cancel()
    reqs = [(r.request_id, r.sent_s, r.chunk_times_s, r.output_tokens) for r in records if r.ok]
    return _result(args, w0, w1, cpu_s, reqs, sum(1 for r in records if not r.ok))


LAG = LagProbe()


class SendTap:
    """When each request's bytes were handed to the socket, keyed by its ``X-Request-Id``: the
    end of the client's send side (from its ``sent_s`` to here is client-added).

    infmon writes the whole request in ``h1._Conn.begin``; aiohttp buffers the request head and
    sends it with the body (``_send_headers_with_payload``, or ``send_headers`` for an empty body).
    The time is taken just after that call returns.
    """

    RID = re.compile(rb"(?i)\r\nX-Request-Id: ([^\r]+)\r\n")

    def __init__(self) -> None:
        self.written_s: dict[str, float] = {}

    def install(self) -> None:
        from aiohttp.http_writer import StreamWriter

        tap = self

        def wrap(original: Any) -> Any:
            def timed(writer: Any, *a: Any, **kw: Any) -> Any:
                head = writer._headers_buf
                out = original(writer, *a, **kw)
                if head:
                    m = tap.RID.search(head)
                    if m:
                        tap.written_s[m.group(1).decode()] = time.perf_counter()
                return out

            return timed

        StreamWriter._send_headers_with_payload = wrap(StreamWriter._send_headers_with_payload)
        StreamWriter.send_headers = wrap(StreamWriter.send_headers)

        from infmon.load import h1

        begin = h1._Conn.begin

        def timed_begin(conn: Any, request: bytes, sink: Any) -> Any:
            out = begin(conn, request, sink)
            t = time.perf_counter()
            m = tap.RID.search(request)
            if m:
                tap.written_s[m.group(1).decode()] = t
            return out

        h1._Conn.begin = timed_begin  # type: ignore[method-assign]


class GcTap:
    """Pauses of Python's cyclic garbage collector (they stop the loop like any blocking call)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._t0 = 0.0

    def install(self) -> None:
        import gc

        def cb(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                self._t0 = time.perf_counter()
            else:
                t = time.perf_counter()
                self.pauses.append((t, t - self._t0, info["generation"]))

        gc.callbacks.append(cb)

    def window(self, w0: float, w1: float) -> dict[str, float]:
        p = [d for t, d, _ in self.pauses if w0 <= t <= w1]
        return {
            "gc_count": len(p),
            "gc_total_ms": sum(p) * 1e3,
            "gc_max_ms": max(p, default=0.0) * 1e3,
        }


SEND = SendTap()
GC = GcTap()


def _result(
    args: argparse.Namespace,
    w0: float,
    w1: float,
    cpu_s: float,
    reqs: list[tuple[str, float, list[float], int | None]],
    failed: int,
) -> dict[str, Any]:
    tokens = 0.0
    for _, _, times, out in reqs:
        if times:
            per_chunk = (out or len(times)) / len(times)
            tokens += per_chunk * sum(1 for t in times if w0 <= t <= w1)
    inside = [r for r in reqs if w0 <= r[1] <= w1]
    return {
        "window_s": w1 - w0,
        "cpu_s": cpu_s,
        "tokens": tokens,
        "lag_p99_ms": LAG.p99_ms(w0, w1),
        "failed": failed,
        "w0": w0,
        "w1": w1,
        "requests": inside,
        **GC.window(w0, w1),
        "runq_wait_ms": RUNQ.get("runq_wait_ms", math.nan),
        "written_s": {r[0]: SEND.written_s[r[0]] for r in inside if r[0] in SEND.written_s},
    }


def worker_main(args: argparse.Namespace) -> None:
    if args.cpu >= 0:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, {args.cpu})
    if args.worker == "infmon" and not args.asyncio:  # as `infmon bench` runs
        from infmon.load.runtime import tune_for_load

        tune_for_load()
    elif not args.asyncio:
        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    SEND.install()
    GC.install()
    run = _infmon_worker if args.worker == "infmon" else _reference_worker
    Path(args.out).write_text(json.dumps(asyncio.run(run(args))))


# --------------------------------------------------------------------------- orchestrator


def check_clock() -> float:
    """perf_counter in a child process vs this one: the offset in ms (must be ~0 to join traces)."""
    before = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", "import time; print(repr(time.perf_counter()))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = time.perf_counter()
    child = float(out)
    if not before <= child <= after:
        raise SystemExit(
            f"perf_counter differs across processes ({child} not in [{before}, {after}]): "
            "server and client times cannot be joined on this OS"
        )
    return (after - before) * 1e3


def start_sim(args: argparse.Namespace, trace: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [
        sys.executable,
        "-m",
        "infmon",
        "sim",
        "--port",
        "0",
        "--scenario",
        args.scenario,
        "--trace-timing",
        str(trace),
        *args.sim_arg,
    ]

    def pin() -> None:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, {args.server_cpu})

    proc = subprocess.Popen(
        cmd,
        cwd=args.sim_cwd or REPO,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=pin if args.server_cpu >= 0 else None,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        m = LISTEN_RE.search(line)
        if m:
            return proc, m.group(1)
    raise SystemExit("the simulator did not start: " + " ".join(cmd))


def run_worker(
    args: argparse.Namespace, url: str, model: str, client: str, c: int
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            client,
            "--url",
            url,
            "--model",
            model,
            "--concurrency",
            str(c),
            "--warmup",
            str(args.warmup),
            "--duration",
            str(args.duration),
            "--prompt-tokens",
            str(args.prompt_tokens),
            "--output-tokens",
            str(args.output_tokens),
            "--cpu",
            str(args.client_cpu),
            "--out",
            out.name,
        ] + (["--asyncio"] if args.asyncio else [])
        cmd += ["--no-journal"] if args.no_journal else []
        subprocess.run(cmd, check=True, cwd=REPO)
        return json.loads(Path(out.name).read_text())


def delays(result: dict[str, Any], trace: dict[str, tuple[float, list[float]]]) -> dict[str, float]:
    """Client-added delay, joined with the simulator's trace by request id.

    A request's client TTFT splits exactly into: send+ (client: its ``sent_s`` → request bytes
    handed to the socket), srv-read (server: → request parsed), the server's TTFT (→ first chunk
    written), 1st+ (client: → first chunk timestamped). ``client+`` = send+ + 1st+ is the delay
    the client adds to TTFT; ``TTFT+`` = client TTFT − server TTFT also holds srv-read.
    """
    written = result.get("written_s", {})
    ttft, first, chunk, send, client, srv_read, joined = [], [], [], [], [], [], 0
    for rid, sent, times, _ in result["requests"]:
        srv = trace.get(rid)
        if srv is None or not times or len(srv[1]) != len(times):
            continue
        received, writes = srv
        joined += 1
        ttft.append((times[0] - sent) - (writes[0] - received))
        first.append(times[0] - writes[0])
        chunk.extend(t - w for t, w in zip(times, writes, strict=True))
        if rid in written:
            send.append(written[rid] - sent)
            client.append(send[-1] + first[-1])
            srv_read.append(received - written[rid])
    q = lambda a, p: float(np.percentile(a, p) * 1e3) if a else math.nan  # noqa: E731
    out: dict[str, float] = {"joined": joined}
    for name, values in (
        ("ttft", ttft),
        ("first", first),
        ("chunk", chunk),
        ("send", send),
        ("client", client),
        ("srv_read", srv_read),
    ):
        out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = q(values, 50), q(values, 99)
    return out


def summary(
    result: dict[str, Any], trace: dict[str, tuple[float, list[float]]]
) -> dict[str, float]:
    tokens = result["tokens"]
    return {
        "tok_s": tokens / result["window_s"],
        "cpu_per_1k": result["cpu_s"] / tokens * 1e3 if tokens else math.nan,
        "lag_p99_ms": result["lag_p99_ms"],
        "failed": result["failed"],
        "gc_total_ms": result.get("gc_total_ms", math.nan),
        "gc_max_ms": result.get("gc_max_ms", math.nan),
        "runq_wait_ms": result.get("runq_wait_ms", math.nan),
        **delays(result, trace),
    }


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


HEADER = (
    f"{'c':>5} {'client':>9} {'tok/s':>9} {'CPU s/1k tok':>12} {'lag p99 ms':>10} "
    f"{'TTFT+ p50/p99 ms':>17} {'1st+ p50/p99 ms':>17} {'chunk+ p50/p99 ms':>18} {'joined':>7} {'sim lag p99':>11}"
)


def row(c: int, name: str, s: dict[str, float]) -> str:
    return (
        f"{c:>5} {name:>9} {s['tok_s']:>9,.0f} {s['cpu_per_1k']:>12.4f} {s['lag_p99_ms']:>10.1f} "
        f"{s['ttft_p50_ms']:>8.2f}/{s['ttft_p99_ms']:<8.2f} {s['first_p50_ms']:>8.2f}/{s['first_p99_ms']:<8.2f}"
        f" {s['chunk_p50_ms']:>8.2f}/{s['chunk_p99_ms']:<9.2f}"
        f" {s['joined']:>7} {s['sim_lag_p99_ms']:>11.1f}"
    )


DELAY_HEADER = (
    f"{'c':>5} {'client':>9} {'client+ p50/p99':>17} {'= send+ p50/p99':>17} {'+ 1st+ p50/p99':>17}"
    f" {'srv-read p50/p99':>17} {'GC ms total/max':>16} {'runq wait ms':>12}"
)


def delay_row(c: int, name: str, s: dict[str, float]) -> str:
    """Where the client-added part of TTFT goes (ms): client+ = send+ + 1st+, per request."""
    pair = lambda k: f"{s[k + '_p50_ms']:>8.2f}/{s[k + '_p99_ms']:<8.2f}"  # noqa: E731
    return (
        f"{c:>5} {name:>9} {pair('client')} {pair('send')} {pair('first')} {pair('srv_read')}"
        f" {s['gc_total_ms']:>7.1f}/{s['gc_max_ms']:<8.1f} {s['runq_wait_ms']:>12.0f}"
    )


def ratio_row(c: int, a: dict[str, float], b: dict[str, float]) -> str:
    return (
        f"{c:>5} {'ratio':>9} {a['tok_s'] / b['tok_s']:>9.2f} {a['cpu_per_1k'] / b['cpu_per_1k']:>12.2f}"
        f" {a['lag_p99_ms'] / b['lag_p99_ms'] if b['lag_p99_ms'] else math.nan:>10.2f}"
    )


def main(args: argparse.Namespace) -> None:
    if args.quick:
        args.warmup, args.duration = 2.0, 5.0
    if args.stress:
        args.sim_arg = [*STRESS, *args.sim_arg]
    offset_ms = check_clock()
    print(
        f"clock: a child's perf_counter falls inside this process's bracket ({offset_ms:.1f} ms wide)"
    )
    print(
        f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"cores: sim on {args.server_cpu}, client on {args.client_cpu}"
    )
    print(
        f"workload: completions, {args.prompt_tokens} prompt / {args.output_tokens} output tokens, "
        f"closed loop, warm-up {args.warmup:g} s, window {args.duration:g} s; sim {args.scenario} "
        + " ".join(args.sim_arg)
    )
    results: dict[str, Any] = {"clock_bracket_ms": offset_ms, "rows": []}
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "trace.jsonl"
        proc, url = start_sim(args, trace_path)
        try:
            model = sim_model(url)
            print(HEADER, flush=True)
            decomposition: list[str] = []
            for c in args.concurrency:
                got, sim_lag = {}, {}
                for name in CLIENTS:
                    sim_lag_p99_ms(url)  # resets the simulator's lag window
                    got[name] = run_worker(args, url, model, name, c)
                    sim_lag[name] = sim_lag_p99_ms(url)
                trace = read_trace(
                    settled(trace_path)
                )  # rows are written shortly after a request ends
                s = {
                    name: {**summary(got[name], trace), "sim_lag_p99_ms": sim_lag[name]}
                    for name in CLIENTS
                }
                for name in CLIENTS:
                    print(row(c, name, s[name]), flush=True)
                print(ratio_row(c, s["infmon"], s["reference"]), flush=True)
                results["rows"].append({"concurrency": c, **s})
                decomposition += [delay_row(c, name, s[name]) for name in CLIENTS]
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    print(
        "\nclient-added delay to TTFT (ms): client+ = send+ (sent_s -> request on the socket) + 1st+"
        " (first chunk written -> timestamped); srv-read (request on the socket -> parsed by the"
        " server) is the server's; runq wait: time the client's loop thread was runnable but"
        " other processes held its core, over the window\n" + DELAY_HEADER
    )
    print("\n".join(decomposition))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--quick", action="store_true", help="2 s warm-up + 5 s window per run (< 3 minutes)"
    )
    p.add_argument(
        "--concurrency",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 16, 64, 256, 1024],
    )
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--scenario", default="baseline")
    p.add_argument(
        "--stress",
        action="store_true",
        help="a much faster server (0.5B model on an H100: ~2,000 tok/s per stream) to find the client's ceiling",
    )
    p.add_argument(
        "--sim-arg",
        action="append",
        default=[],
        help="extra simulator argument (repeatable, e.g. --sim-arg=--gpu --sim-arg=H100-80GB)",
    )
    p.add_argument(
        "--sim-cwd", help="checkout whose `python -m infmon sim` runs (default: this one)"
    )
    p.add_argument(
        "--server-cpu", type=int, default=0, help="core for the simulator (-1: no pinning)"
    )
    p.add_argument(
        "--client-cpu", type=int, default=1, help="core for each client (-1: no pinning)"
    )
    p.add_argument(
        "--asyncio",
        action="store_true",
        help="run both clients on asyncio's own loop (default: uvloop, as `infmon bench` does)",
    )
    p.add_argument(
        "--no-journal",
        action="store_true",
        help="infmon without its session journal (to measure what recording costs)",
    )
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
