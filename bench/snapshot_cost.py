"""What the live view costs as a step grows: ``Session.snapshot`` at 4 Hz with one open step.

The monitor holds a level for as long as the operator likes, and the running step's figures
(exact percentiles of every measured request, vLLM's definitions) are read by several panes.
This script fills one step with N synthetic records (16 chunks, 20 ms apart, 100 requests a
second of simulated time), then for 20 simulated seconds goes on at that rate and takes 4
snapshots a second (a baseline step set), and prints the CPU milliseconds the snapshots take per
second and that cost as a ratio to the smallest step's, measured in the same run. Past
``LIVE_EXACT_LIMIT`` (200,000) measured requests the step's latencies are histograms: the cost
stops growing.

    python bench/snapshot_cost.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from infmon.model.live.session import Session
from infmon.model.records.request import RequestRecord
from infmon.model.steps.span import CLOSED, Level

RATE = 100.0
"""Requests a second, filled and measured (the monitor's 30 s windows hold ~3,000)."""


def main() -> None:
    s = Session(start_s=0.0)
    s.apply_steps(s.ledger.book.begin(Level(CLOSED, 64), 0.0, "operator", 0.0), 0.0)
    s.set_baseline(0.0)
    step = s.ledger.book.steps[-1].index
    rid, first = 0, None

    def add(n: int) -> float:
        """``n`` more requests, one every 1/RATE s; the time the last one ended."""
        nonlocal rid
        end = 0.0
        for _ in range(n):
            rid += 1
            sent = rid / RATE
            ch = tuple(sent + 0.05 + 0.02 * k for k in range(16))
            end = ch[-1]
            s.add_record(
                RequestRecord(
                    request_id=rid, sent_s=sent, chunk_times_s=ch, end_s=end,
                    output_tokens=16, prompt_tokens=100, step=step,
                )
            )  # fmt: skip
        return end

    for total in (1_000, 10_000, 30_000, 60_000, 120_000, 199_000, 400_000):
        s.snapshot(add(total - rid))  # the fill, its samples taken
        t0 = time.process_time()
        for _ in range(20 * 4):  # 20 s: 4 snapshots a second, RATE/4 requests before each
            s.snapshot(add(int(RATE / 4)))
        ms = 1e3 * (time.process_time() - t0) / 20
        first = first or ms
        print(
            f"{rid:7,d} records in the step: {ms:5.1f} ms of snapshots a second ({ms / first:.2f}×)"
        )


if __name__ == "__main__":
    main()
