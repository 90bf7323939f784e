"""bench/growth_reach.py: how far any forecast from c = 1, 2, 4 can reach at c = 8 and 16 on a
host, read from sweeps of one server with no model in between (issue 30's must-show 1).

On the shipped table (twelve real-vLLM sweeps of 5-6 Dec, ``bench/data/real-vllm-sweeps.csv``)
and on sweeps built to have one shape, scaled by each one's pace: there every sweep's curve is
the others' curve, and the script must say so; one sweep bent past c=4 must be the one it
names as missed."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.recorded import unpack_journal
from tests.scripts import load_script

LEVELS = (1, 2, 4, 8, 16)


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/growth_reach.py")


def sweeps_of_one_shape(bench, paces: list[float], bent: dict[int, float]) -> list[object]:
    """Three rounds per level of one curve, each sweep at its own pace (a slower host: TPOT and
    TTFT up, tokens/s down, alike); ``bent`` multiplies one sweep's c=16 TPOT and TTFT."""
    rows = []
    for k, pace in enumerate(paces):
        for j, c in enumerate(LEVELS):
            for r in range(3):
                tpot = (2.5 + 0.3 * c) * pace * (1 + 0.01 * (r - 1))
                ttft = (6.0 + 1.1 * c) * pace * (bent.get(k, 1.0) if c == 16 else 1.0)
                tpot *= bent.get(k, 1.0) if c == 16 else 1.0
                rows.append(bench.Row(f"s{k}", j * 3 + r, c, (tpot, ttft, c * 1e3 / tpot)))
    return rows


def run(bench, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert bench.main(list(args)) == 0
    return capsys.readouterr().out


def test_sweeps_of_one_shape_are_each_the_others_curve(
    bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t.csv"
    bench.write_table(table, sweeps_of_one_shape(bench, [1.0, 1.3, 0.8, 1.6], {}))
    out = run(bench, capsys, "--table", str(table))
    assert "all six within ±15%: 4 of 4 sweeps" in out
    # the table round-trips, and the curve is exact whatever the pace
    curves = bench.level_means(bench.read_table(table))
    assert np.allclose(bench.others_curve(curves, "s3"), 1.0, atol=1e-3)


def test_a_sweep_bent_past_c4_is_the_one_missed(
    bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t.csv"
    bench.write_table(table, sweeps_of_one_shape(bench, [1.0, 1.3, 0.8, 1.6], {2: 1.4}))
    out = run(bench, capsys, "--table", str(table))
    missed = [line.split(":")[0].strip() for line in out.splitlines() if "worst" in line]
    passed = [line.split(":")[0].strip() for line in out.splitlines() if "all six" in line[-9:]]
    assert "s2" in missed and "s2" not in passed
    assert "all six within ±15%: 3 of 4 sweeps" in out


def test_the_real_sweeps(bench, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's figures: twelve sweeps, the growth from c=4 to 16 spread by 9-15% (SD)
    per figure and not carried by the growth from 1 to 4 (r < 0), and the other sweeps' curve
    holding all six figures in 6 of 12."""
    out = run(bench, capsys)
    assert out.startswith("12 sweeps")
    rs = [float(x) for x in re.findall(r"r between the two: ([+-][0-9.]+)", out)]
    assert len(rs) == 3 and all(r < 0 for r in rs)
    assert "all six within ±15%: 6 of 12 sweeps" in out


def test_a_recorded_session_is_read_as_sim_fit_reads_it(
    bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three real sweeps of 4 Dec from their journals: the steps ``sim --fit`` reads (the
    client self-check's flagged step left out), written to a table and read back."""
    names = ("steady-vllm", "wandering-vllm", "jittered-vllm")
    dirs = [str(unpack_journal(n, tmp_path / n)) for n in names]
    table = tmp_path / "fixtures.csv"
    out = run(bench, capsys, *dirs, "--save-table", str(table))
    assert out.startswith("3 sweeps")
    rows = bench.read_table(table)
    assert {r.concurrency for r in rows} == set(LEVELS)
    assert all(np.isfinite(r.figures).all() and min(r.figures) > 0 for r in rows)
