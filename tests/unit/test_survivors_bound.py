"""Issue 31: a step whose load workers left after a worker loss were saturated by the re-split
share is marked client-bound (``client_late``) in the report, with a Diagnosis line; survivors
that kept up, and busy workers with no loss, are not. Real objects: the run wiring, the step
ledger, the journal on disk, the report built from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from infmon.clock import FakeClock
from infmon.commands.wiring import RunWiring
from infmon.engine.loss import WorkerLoss
from infmon.journal import JournalWriter
from infmon.model.base.loghist import LogHistogram
from infmon.model.records.request import RequestRecord
from infmon.model.records.survivors import LossMark, SurvivorCheck
from infmon.model.records.window import LoadWindow
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import CLOSED, Level, StepEvent
from infmon.report import build_summary

T0, WARMUP, LOSS_T, END = 100.0, 0.5, 103.0, 109.0
WIN = 0.25


def _window(worker: int, t0: float, busy: float, runq: float = 0.0) -> LoadWindow:
    lag_s = 0.001
    lag = LogHistogram()
    lag.add_one(lag_s)
    return LoadWindow(
        worker, t0, t0 + WIN, sent=2, finished=2, failed=0, cancelled=0, inflight=4,
        tokens=128.0, inflight_area_s=4 * WIN, inflight_by_step=((1, 4),),
        sent_by_step=((1, 10),), lag=lag.sparse(), cpu_s=busy * WIN, runq_s=runq * WIN,
    )  # fmt: skip


def _record(rid: int, sent: float) -> RequestRecord:
    chunks = tuple(sent + 0.05 + 0.01 * i for i in range(16))
    return RequestRecord(
        request_id=rid, sent_s=sent, chunk_times_s=chunks, end_s=chunks[-1],
        output_tokens=16, finish_reason="length", http_status=200, step=1, concurrency=8,
    )  # fmt: skip


def _run(
    tmp_path: Path, *, lose: bool, busy_after: float, busy_before: float = 0.3, runq: float = 0.0
) -> tuple[dict, str]:
    clock = FakeClock(T0)
    journal = JournalWriter(tmp_path, clock)
    journal.write_config({"url": "http://127.0.0.1:1"})
    ledger = StepLedger()
    wiring = RunWiring(journal, ledger)

    def step(ev: StepEvent) -> None:
        ledger.apply([ev])
        wiring.step_events([ev])

    step(StepEvent("begin", 1, T0, CLOSED, 8, "operator", WARMUP))
    rid, t = 0, T0
    while t < END - 1e-9:
        after = t >= LOSS_T
        for worker in (0,) if (after and lose) else (0, 1):
            busy = busy_after if after else busy_before
            wiring.window(_window(worker, t, busy, runq))
            for _ in range(2):
                wiring.records(_record_batch(worker, rid, t))
                rid += 1
        if lose and abs(t - (LOSS_T - WIN)) < 1e-9:
            level = Level(CLOSED, 8)
            wiring.lost(WorkerLoss(1, LOSS_T, "pid 9 killed by SIGKILL", 0, (), 1, 1, level))
        t += WIN
    step(StepEvent("end", 1, END))
    ledger.settle()
    journal.close()
    doc = build_summary(tmp_path)
    (entry,) = doc["steps"]
    return dict(entry), "\n".join(doc["diagnosis"])


def _record_batch(worker: int, rid: int, t: float):
    from infmon.engine.types import RecordBatch

    return RecordBatch(worker, [_record(rid, t)])


def test_survivors_saturated_after_a_loss_mark_the_step_client_bound(tmp_path: Path) -> None:
    entry, diagnosis = _run(tmp_path, lose=True, busy_after=0.96)
    assert entry["client_late"] is True
    (note,) = [n for n in entry["client_notes"] if n.startswith("client-bound")]
    assert "after worker 1 was lost the 1 surviving load worker" in note
    assert "busy 96% of a core" in note
    assert "c=8: client self-check: client-bound: after worker 1 was lost" in diagnosis


def test_a_starved_step_whose_survivors_saturated_says_both(tmp_path: Path) -> None:
    entry, diagnosis = _run(tmp_path, lose=True, busy_after=0.9, runq=0.1)
    assert entry["client_late"] is True
    notes = entry["client_notes"]
    assert any(n.startswith("client timestamps are late (CPU starvation") for n in notes), notes
    (bound,) = [n for n in notes if n.startswith("client-bound: after worker 1 was lost")]
    assert "busy 90% of a core; a load thread waited for a CPU 10% of the time" in bound
    assert "client self-check: client-bound: after worker 1 was lost" in diagnosis


def test_survivors_that_kept_up_leave_the_step_unmarked(tmp_path: Path) -> None:
    entry, diagnosis = _run(tmp_path, lose=True, busy_after=0.4, busy_before=0.95)
    assert entry["client_late"] is False  # busy before the loss is not the survivors' state
    assert "client-bound" not in diagnosis


def test_busy_workers_without_a_loss_are_not_client_bound(tmp_path: Path) -> None:
    entry, _ = _run(tmp_path, lose=False, busy_after=0.96)
    assert entry["client_late"] is False


def test_late_timestamps_after_a_loss_name_the_loop_lag() -> None:
    check = SurvivorCheck()
    check.window(1, 0, 0.0, 0.25, cpu_s=0.2)  # before any loss: not gathered
    check.lost(LossMark(1.0, 2, 2))
    lag = LogHistogram()
    for _ in range(100):
        lag.add_one(0.2)
    check.window(1, 0, 1.0, 1.25, lag, cpu_s=0.1)
    check.window(1, 1, 1.0, 1.25, None, cpu_s=0.05, runq_s=0.05)
    check.window(1, 2, 1.0, 1.25, None, cpu_s=0.25)  # the lost worker's late window
    verdict = check.verdict(1)
    assert "after worker 2 was lost the 2 surviving load workers" in verdict
    assert "loop lag p99 2" in verdict and "waited for a CPU 20% of the time" in verdict
    assert "busy" not in verdict  # the lost worker's own window is not a survivor's
    assert check.verdict(1) == ""  # said once


@pytest.mark.parametrize("cpu", [0.84, 0.86])
def test_cpu_near_one_core_is_the_line(cpu: float) -> None:
    check = SurvivorCheck()
    check.lost(LossMark(0.0, 1, 1))
    check.window(1, 0, 0.0, 1.0, cpu_s=cpu)
    assert bool(check.verdict(1)) is (cpu >= 0.85)


def test_a_survivor_is_starved_by_its_wait_each_time_it_ran_not_its_share() -> None:
    """Counted runs decide (``client_late.Starving``): 30% of the time in 0.2 ms waits is a
    thread that ran on time; 3% in 2 ms waits is one whose timestamps were late."""
    check = SurvivorCheck()
    check.lost(LossMark(1.0, 2, 2))
    check.window(1, 0, 1.0, 2.0, None, cpu_s=0.1, runq_s=0.3, runs=1500)
    assert check.verdict(1) == ""
    check.window(2, 0, 1.0, 2.0, None, cpu_s=0.1, runq_s=0.03, runs=15)
    assert "a load thread waited for a CPU 3% of the time, 2.0 ms each time it woke" in (
        check.verdict(2)
    )
