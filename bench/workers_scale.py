"""Do more load workers add load? One client in process, 1 and 2 worker processes, against the
firehose (issue 16, must show 1).

Starts ``infmon sim --firehose`` (no engine: every completion's chunks are written at once, so
the client, not the server, is what is measured) and, for each configuration, runs infmon's
load engine as ``infmon bench`` wires it (controller, workers, the session journal) at one
closed-loop level. Over the same measured window after a warm-up it takes the output tokens/s
(the tokens of every record whose chunks arrived inside the window, counted per chunk: exact
whatever the workers' window timing; a saturated in-process loop closes its 250 ms windows
seconds late), the TTFT p50 of the requests sent inside it, and the client's CPU: the controller process (every thread: decoding, the journal) plus each worker
process (``/proc/PID/stat``). The reference is ``in-process``, measured in the same run; the
configurations run interleaved, ``--repeats`` times, and the medians are printed with their
ratios, the machine's cores, the load average and the CPU other processes took meanwhile.

    python bench/workers_scale.py --quick     # ~1 minute
    python bench/workers_scale.py             # 3 repeats, 8 s windows (~3 minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from infmon.clock import MonotonicClock  # noqa: E402
from infmon.commands.wiring import RunWiring  # noqa: E402
from infmon.config import Config  # noqa: E402
from infmon.engine.controller import LoadEngine  # noqa: E402
from infmon.engine.link import ProcessLink  # noqa: E402
from infmon.journal import JournalWriter  # noqa: E402
from infmon.model.records.request import RequestRecord  # noqa: E402
from infmon.model.shape.lengths import parse_lengths  # noqa: E402
from infmon.model.steps.ledger import StepLedger  # noqa: E402
from infmon.model.steps.span import CLOSED, Level  # noqa: E402
from infmon.sim.launch import start_simulator, stop_process  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def host_busy_s() -> float:
    """CPU seconds every core has spent busy since boot (``/proc/stat``)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / TICK


@dataclass(frozen=True)
class Measure:
    config: str
    tok_s: float
    cpu_ms_per_1k: float
    client_cores: float
    controller_ms_per_1k: float
    """The controller process's part (decoding every record, the journal)."""
    ttft_p50_ms: float
    server_cores: float
    others_cores: float
    errors: int


@dataclass(frozen=True)
class Sample:
    t: float
    controller_cpu: float
    client_cpu: float
    server_cpu: float
    host: float


def sample(worker_pids: list[int], server_pid: int) -> Sample:
    own = time.process_time()
    return Sample(
        time.monotonic(),
        own,
        own + sum(proc_cpu_s(p) for p in worker_pids),
        proc_cpu_s(server_pid),
        host_busy_s(),
    )


async def measure(name: str, workers: int, url: str, server_pid: int, args) -> Measure:
    """One configuration: ``workers`` 0 is the in-process reference."""
    clock = MonotonicClock()
    cfg = Config(url=url, seed=7, output_tokens=parse_lengths(str(args.output_tokens)))
    with tempfile.TemporaryDirectory() as tmp:
        journal = JournalWriter(Path(tmp), clock)
        journal.write_config(cfg.to_public_dict())
        wiring = RunWiring(journal, StepLedger(cfg.slo))
        records: list[RequestRecord] = []
        wiring.on_record.append(records.append)
        links = [ProcessLink(i) for i in range(workers)] if workers else None
        engine = LoadEngine(
            cfg,
            clock,
            on_records=wiring.records,
            on_window=wiring.window,
            on_lost=wiring.lost,
            in_process=not workers,
            links=links,
        )
        try:
            await engine.start()
            pids = [link.proc.pid for link in links or [] if link.proc is not None]
            warm = clock.now() + args.warmup
            engine.set_level(1, Level(CLOSED, args.concurrency), warm)
            engine.resume(warm)
            await asyncio.sleep(args.warmup)
            engine.flush()
            t0, s0 = clock.now(), sample(pids, server_pid)
            await asyncio.sleep(args.duration)
            engine.flush()
            t1, s1 = clock.now(), sample(pids, server_pid)
            engine.pause()
            await engine.wait_idle(30)
            await asyncio.sleep(0.3)  # the last records
        finally:
            await engine.stop()
            journal.close()
    tokens = sum(_tokens_between(r, t0, t1) for r in records)
    ttfts = sorted(r.ttft_s for r in records if r.ok and t0 <= r.sent_s < t1)
    failed = sum(
        1 for r in records if not r.ok and r.error_kind != "cancelled" and t0 <= (r.end_s or 0) < t1
    )
    wall = s1.t - s0.t
    client, server = s1.client_cpu - s0.client_cpu, s1.server_cpu - s0.server_cpu
    return Measure(
        name,
        tokens / (t1 - t0),
        client / tokens * 1e6,
        client / wall,
        (s1.controller_cpu - s0.controller_cpu) / tokens * 1e6,
        statistics.median(ttfts) * 1e3 if ttfts else math.nan,
        server / wall,
        (s1.host - s0.host - client - server) / wall,
        failed,
    )


def _tokens_between(r: RequestRecord, t0: float, t1: float) -> float:
    """The record's output tokens whose chunks arrived in ``[t0, t1)`` (even split per chunk)."""
    times = r.chunk_times_s
    if not times or times[-1] < t0 or times[0] >= t1:
        return 0.0
    inside = sum(1 for t in times if t0 <= t < t1)
    return (r.output_tokens or len(times)) * inside / len(times)


def median(ms: list[Measure], field: str) -> float:
    return statistics.median(getattr(m, field) for m in ms)


def report(results: dict[str, list[Measure]], args) -> None:
    cores = len(os.sched_getaffinity(0))
    print(
        f"\nmachine: {os.cpu_count()} cores ({cores} usable) · load average now "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"firehose · closed loop c={args.concurrency} · {args.output_tokens} output tokens a "
        f"request · {args.duration:g} s measured after {args.warmup:g} s · medians of "
        f"{args.repeats}"
    )
    head = (
        f"{'config':<12}{'tok/s':>11}{'CPU ms/1k tok':>15}{'client cores':>14}"
        f"{'tok/s per core':>16}{'ctrl ms/1k':>12}{'TTFT p50 ms':>13}{'server cores':>14}{'others':>8}{'errors':>8}"
    )
    print(head)
    ref = results["in-process"]
    for name, ms in results.items():
        tok, cpu = median(ms, "tok_s"), median(ms, "cpu_ms_per_1k")
        print(
            f"{name:<12}{tok:>11,.0f}{cpu:>15.2f}{median(ms, 'client_cores'):>14.2f}"
            f"{1e6 / cpu:>16,.0f}{median(ms, 'controller_ms_per_1k'):>12.2f}"
            f"{median(ms, 'ttft_p50_ms'):>13.1f}"
            f"{median(ms, 'server_cores'):>14.2f}{median(ms, 'others_cores'):>8.2f}"
            f"{sum(m.errors for m in ms):>8}"
        )
    print("\nratios (medians):")
    base_tok, base_cpu = median(ref, "tok_s"), median(ref, "cpu_ms_per_1k")
    for name, ms in results.items():
        if name == "in-process":
            continue
        print(
            f"  {name} / in-process: tok/s ×{median(ms, 'tok_s') / base_tok:.3f}, "
            f"CPU per token ×{median(ms, 'cpu_ms_per_1k') / base_cpu:.3f}"
        )
    if "1 worker" in results and "2 workers" in results:
        one, two = results["1 worker"], results["2 workers"]
        tok = median(two, "tok_s") / median(one, "tok_s")
        cpu = median(two, "cpu_ms_per_1k") / median(one, "cpu_ms_per_1k")
        print(f"  2 workers / 1 worker: tok/s ×{tok:.3f}, CPU per token ×{cpu:.3f}")
        verdict = "holds" if tok >= 0.95 and abs(cpu - 1) <= 0.10 else "does NOT hold"
        print(f"  must show 1 (2 workers lose no throughput, CPU per token within 10%): {verdict}")


async def main(args) -> None:
    configs = [("in-process", 0), *((f"{n} worker{'s' * (n > 1)}", n) for n in args.workers)]
    proc, url = start_simulator(["--firehose", "--port", "0"], cwd=REPO)
    results: dict[str, list[Measure]] = {name: [] for name, _ in configs}
    print(f"firehose {url} (pid {proc.pid}) · load average {os.getloadavg()[0]:.2f}")
    try:
        for rep in range(args.repeats):
            for name, n in configs:
                m = await measure(name, n, url, proc.pid, args)
                results[name].append(m)
                print(
                    f"  run {rep + 1} {name:<10} {m.tok_s:>10,.0f} tok/s  "
                    f"{m.cpu_ms_per_1k:6.2f} ms/1k  client {m.client_cores:.2f} cores  "
                    f"server {m.server_cores:.2f}  others {m.others_cores:.2f}",
                    flush=True,
                )
    finally:
        stop_process(proc)
    report(results, args)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=256)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--workers", default="1,2", help="worker process counts to compare (default 1,2)"
    )
    ap.add_argument("--quick", action="store_true", help="1 repeat, 4 s windows")
    args = ap.parse_args(argv)
    args.workers = [int(x) for x in args.workers.split(",") if x.strip()]
    if args.quick:
        args.repeats, args.duration, args.warmup = 1, 4.0, 1.5
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
