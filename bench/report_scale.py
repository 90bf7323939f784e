"""Reporting a 1-million-request session: time and peak memory against the targets.

A day at 50 requests/s is ~4M requests; the target is that 1M report in < 30 s and < 1 GB.
The session is synthetic (closed-loop steps of ~25k requests, 32 output tokens each, scrapes
every second) but written through the real ``JournalWriter``; the report is built in a fresh
subprocess so its peak RSS is the report's alone.

    python bench/report_scale.py [--requests 1000000] [--dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import itertools
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_S, TARGET_MB = 30.0, 1024.0
CHILD = """
import resource, sys, time
from pathlib import Path
from infmon.report import write_reports
t0 = time.perf_counter()
write_reports(Path(sys.argv[1]))
dt = time.perf_counter() - t0
print(dt, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def make_session(path: Path, requests: int) -> None:
    from tests.synthetic import SyntheticServer, write_synthetic_session

    cycle = list(itertools.islice(itertools.cycle((8, 16, 32, 64)), 200))
    write_synthetic_session(
        path,
        concurrencies=cycle,
        step_duration_s=1500.0,
        out_tokens=32,
        warmup_s=5.0,
        max_requests=requests,
        server=SyntheticServer(spec_acceptance=0.6),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--dir", type=Path, help="reuse or create the session here")
    ap.add_argument("--keep", action="store_true", help="keep the generated session")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="infmon-scale-"))
    session = root / "session"
    try:
        if not (session / "records.jsonl").exists():
            t0 = time.perf_counter()
            make_session(session, args.requests)
            print(
                f"generated {args.requests:,} requests in {time.perf_counter() - t0:.0f} s "
                f"({(session / 'records.jsonl').stat().st_size / 1e6:.0f} MB of records)"
            )
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(session)],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, peak_mb = (float(x) for x in out.stdout.split())
        doc = json.loads((session / "report.json").read_text())
        print(
            f"report of {doc['session']['requests']:,} requests, {len(doc['steps'])} steps: "
            f"{seconds:.1f} s (target < {TARGET_S:.0f} s, ratio {seconds / TARGET_S:.2f}), "
            f"peak RSS {peak_mb:.0f} MB (target < {TARGET_MB:.0f} MB, "
            f"ratio {peak_mb / TARGET_MB:.2f})"
        )
        return 0 if seconds < TARGET_S and peak_mb < TARGET_MB else 1
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    _ = resource
    sys.exit(main())
