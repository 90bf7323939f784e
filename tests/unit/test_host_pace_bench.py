"""bench/host_pace.py: the unit is timed in the thread's CPU time (a wait for a core is not in
it), and its per-core summary reads what was sampled."""

from __future__ import annotations

import os
import time

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/host_pace.py")


def test_the_probe_writes_one_cpu_time_per_unit(bench, tmp_path) -> None:
    core = min(os.sched_getaffinity(0))
    out = tmp_path / "core.txt"
    pid = os.fork()
    if pid == 0:  # the probe pins itself: keep that out of the test's own process
        try:
            bench.probe(core, 0.05, time.time() + 0.6, out)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    samples = bench.read_samples(out)
    assert len(samples) >= 3
    assert all(ms > 0 for _, ms in samples)
    assert [t for t, _ in samples] == sorted(t for t, _ in samples)


def test_cpu_time_counts_only_the_time_the_thread_runs(bench) -> None:
    """Off a core (asleep here, as when it waits for one) the thread is not charged."""
    t, w = time.thread_time(), time.perf_counter()
    bench.unit()
    time.sleep(0.05)
    cpu, wall = time.thread_time() - t, time.perf_counter() - w
    assert cpu < wall - 0.04


def test_the_summary_reads_the_deciles(bench) -> None:
    fast, slow = [(float(i), 2.4) for i in range(20)], [(float(i), 4.0) for i in range(20)]
    line = bench.describe(1, fast + slow)
    assert "core 1: 40 units" in line
    assert "p10 2.40" in line and "p90 4.00" in line
    assert "p90 / p10 1.67" in line
    assert "too few" in bench.describe(0, fast[:5])
