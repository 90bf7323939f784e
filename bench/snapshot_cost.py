"""What the live view costs as a step grows: ``Session.snapshot`` at 4 Hz with one open step.

The monitor holds a level for as long as the operator likes, and the running step's figures
(exact percentiles of every measured request, vLLM's definitions) are read by several panes.
This script fills one step with N synthetic records (16 chunks, 20 ms apart), then for 20
simulated seconds adds 24 records a second and takes 4 snapshots a second (a baseline step set,
so the header compares at 4 Hz too), and prints the CPU milliseconds the snapshots take per
second and that cost as a ratio to the smallest step's, measured in the same run.

    python bench/snapshot_cost.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infmon.model.records import RequestRecord
from infmon.model.session import Session
from infmon.model.steps import CLOSED, Level


def main() -> None:
    s = Session(start_s=0.0)
    s.apply_steps(s.ledger.book.begin(Level(CLOSED, 64), 0.0, "operator", 0.0), 0.0)
    s.set_baseline(0.0)
    step = s.ledger.book.steps[-1].index
    rid, t, first = 0, 1.0, None

    def add(n: int, sent: float) -> None:
        nonlocal rid
        for _ in range(n):
            rid += 1
            ch = tuple(sent + 0.05 + 0.02 * k for k in range(16))
            s.add_record(
                RequestRecord(
                    request_id=rid, sent_s=sent, chunk_times_s=ch, end_s=ch[-1],
                    output_tokens=16, prompt_tokens=100, step=step,
                )
            )  # fmt: skip

    for total in (1_000, 10_000, 30_000, 60_000, 120_000):
        add(total - rid, t)
        t0 = time.process_time()
        for _ in range(20 * 4):
            t += 0.25
            add(6, t - 0.3)
            s.snapshot(t)
        ms = 1e3 * (time.process_time() - t0) / 20
        first = first or ms
        print(
            f"{rid:7,d} records in the step: {ms:5.1f} ms of snapshots a second ({ms / first:.2f}×)"
        )


if __name__ == "__main__":
    main()
