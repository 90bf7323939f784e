"""Reporting a day-long session: time and peak memory against the targets, JSON lines beside.

A day at 50 requests/s is ~4.3M requests; the targets are that report in < 30 s and < 1 GB, and
one step or one minute of it read back in < 1 s. The session is a synthetic day (closed-loop
steps of 1,500 s at 8 … 128 streams, ~50 requests/s on average, 32 output tokens each, a server
scrape every second: ~4.3M requests and ~86k scrapes) but written through the real
``JournalWriter``; the same records are also written as the old JSON-lines
journal (``infmon.session/1``), which ``infmon report`` still reads, and reported the same way for
the ratio. Each report runs in a fresh subprocess so its peak RSS is the report's alone.

    python bench/report_scale.py [--records 4300000] [--dir DIR] [--keep] [--no-jsonl]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_S, TARGET_MB, TARGET_READ_S = 30.0, 1024.0, 1.0
REPORT = """
import resource, sys, time
from pathlib import Path
from infmon.report import write_reports
t0, c0 = time.perf_counter(), time.process_time()
write_reports(Path(sys.argv[1]), Path(sys.argv[2]))
dt, cpu = time.perf_counter() - t0, time.process_time() - c0
print(dt, cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
READ = """
import json, sys, time
from pathlib import Path
from infmon.journal import SessionReader
from infmon.model.records.figures import summarize_columns
r = SessionReader(Path(sys.argv[1]))
origin = r.origin_s()
t0 = time.perf_counter()
steps = r.steps()
sizes = dict(r.shards()[0].execute("SELECT step, count(*) FROM records GROUP BY step"))
step = max(steps, key=lambda s: sizes.get(s, 0))
t1 = time.perf_counter()
cols = r.read_columns(step=step)
stats = summarize_columns(cols, 1500.0)
t2 = time.perf_counter()
mid = float(cols.sent_s[len(cols) // 2])
minute = r.read_columns(since_s=mid, until_s=mid + 60.0)
t3 = time.perf_counter()
print(json.dumps({"step": step, "step_records": len(cols), "step_s": t2 - t1,
                  "index_s": t1 - t0, "minute_records": len(minute), "minute_s": t3 - t2,
                  "ttft_p50_ms": stats.ttft.p50 * 1e3}))
"""


def make_session(path: Path, records: int) -> None:
    from tests.synthetic import SyntheticServer, write_synthetic_session

    cycle = list(itertools.islice(itertools.cycle((8, 16, 32, 64, 128)), 1000))
    write_synthetic_session(
        path,
        concurrencies=cycle,
        step_duration_s=1500.0,
        out_tokens=32,
        warmup_s=5.0,
        max_requests=records,
        server=SyntheticServer(knee_c=64, max_num_seqs=128, spec_acceptance=0.6),
    )


def as_json_lines(src: Path, dst: Path) -> None:
    """The same session in the old JSON-lines journal (what infmon wrote before SQLite)."""
    from infmon.journal import SessionReader
    from infmon.journal.codec import encode_record
    from infmon.journal.writer import write_json_atomic

    reader = SessionReader(src)
    dst.mkdir(parents=True, exist_ok=True)
    write_json_atomic(dst / "config.json", {"schema": "infmon.session/1", **reader.meta})
    with open(dst / "records.jsonl", "w", encoding="utf-8") as f:
        batch = []
        for r in reader.iter_records():
            batch.append(json.dumps(encode_record(r), separators=(",", ":")))
            if len(batch) == 10_000:
                f.write("\n".join(batch) + "\n")
                batch = []
        f.write("\n".join(batch) + "\n" if batch else "")
    for name, items in (("events", reader.iter_events()), ("scrapes", reader.iter_scrapes())):
        with open(dst / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(x, separators=(",", ":")) + "\n" for x in items)


def _span(session: Path) -> str:
    from infmon.journal import SessionReader

    db = SessionReader(session).shards()[0]
    (first, last, n), (scrapes,) = (
        db.execute("SELECT min(sent_s), max(sent_s), count(*) FROM records").fetchone(),
        db.execute("SELECT count(*) FROM scrapes").fetchone(),
    )
    hours = (last - first) / 3600
    return f"session: {n:,} requests over {hours:.1f} h ({n / (last - first):.0f}/s), {scrapes:,} scrapes"


def child(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True
    )
    if out.returncode != 0:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    return out.stdout


def report(session: Path, out: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of writing every report of ``session``."""
    seconds, cpu, peak_mb = (float(x) for x in child(REPORT, str(session), str(out)).split())
    return seconds, cpu, peak_mb


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=4_300_000)
    ap.add_argument("--dir", type=Path, help="reuse or create the sessions here")
    ap.add_argument("--keep", action="store_true", help="keep the generated sessions")
    ap.add_argument("--no-jsonl", action="store_true", help="skip the JSON-lines reference")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="infmon-scale-"))
    session, legacy = root / "session", root / "session-jsonl"
    try:
        if not (session / "journal.sqlite").exists():
            t0 = time.perf_counter()
            make_session(session, args.records)
            size = sum(p.stat().st_size for p in session.glob("journal*.sqlite"))
            print(
                f"generated {args.records:,} requests in {time.perf_counter() - t0:.0f} s "
                f"(journal.sqlite {size / 1e6:.0f} MB, {size / args.records:.0f} B/request)"
            )
        print(_span(session))
        print(
            f"load average {os.getloadavg()[0]:.2f} (other work on this machine slows the wall "
            "time; the CPU time is the report's own)"
        )
        seconds, cpu, peak = report(session, root / "out")
        doc = json.loads((root / "out" / "report.json").read_text())
        n = doc["session"]["requests"]
        ok = seconds < TARGET_S and peak < TARGET_MB
        print(
            f"SQLite journal: report of {n:,} requests, {len(doc['steps'])} steps: "
            f"{seconds:.1f} s (CPU {cpu:.1f} s; target < {TARGET_S:.0f} s), peak RSS {peak:.0f} MB "
            f"(target < {TARGET_MB:.0f} MB)"
        )
        read = json.loads(child(READ, str(session)))
        print(
            f"SQLite journal: one step (step {read['step']}, {read['step_records']:,} requests) "
            f"read and summarised in {read['step_s']:.2f} s; one minute "
            f"({read['minute_records']:,} requests) read in {read['minute_s']:.2f} s "
            f"(target < {TARGET_READ_S:.0f} s each)"
        )
        ok = ok and read["step_s"] < TARGET_READ_S and read["minute_s"] < TARGET_READ_S
        if not args.no_jsonl:
            if not (legacy / "records.jsonl").exists():
                t0 = time.perf_counter()
                as_json_lines(session, legacy)
                size = (legacy / "records.jsonl").stat().st_size
                print(
                    f"wrote the same session as JSON lines in {time.perf_counter() - t0:.0f} s "
                    f"(records.jsonl {size / 1e6:.0f} MB)"
                )
            j_seconds, j_cpu, j_peak = report(legacy, root / "out-jsonl")
            print(
                f"JSON-lines journal, same records: {j_seconds:.1f} s (CPU {j_cpu:.1f} s), "
                f"peak RSS {j_peak:.0f} MB; "
                f"SQLite/JSON-lines: time {seconds / j_seconds:.2f}, memory {peak / j_peak:.2f}"
            )
        return 0 if ok else 1
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
