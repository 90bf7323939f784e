"""bench/front_split.py on real sweeps (``tests/fixtures/sessions/*.source.txt``): each level's
front (client TTFT − the engine's queued → first token) and how it grew from c=4 to c=16,
beside what ``sim --fit``'s two forms make of it from c = 1, 2, 4.

Two sweeps of one load on one host: the front grew 2.5× in one and 4.9× in the other. That is
the part of the client's TTFT at c=16 a fit of c = 1, 2, 4 cannot know here (issue 30)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.recorded import unpack_journal
from tests.scripts import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("bench/front_split.py")


def growth(bench, session: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, list[float]]:
    assert bench.main([str(session)]) == 0
    out = capsys.readouterr().out
    line = next((x for x in out.splitlines() if "front past c=1" in x), "")
    return out, [float(v) for v in re.findall(r"([0-9.]+)x", line)]


def test_the_fronts_growth_differs_between_two_sweeps_of_one_load(
    bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, steady = growth(bench, unpack_journal("steady-vllm", tmp_path / "a"), capsys)
    _, jittered = growth(bench, unpack_journal("jittered-vllm", tmp_path / "b"), capsys)
    # measured, the line (c - 1: 15/3), the rate form (the other streams' tokens/s)
    assert steady[1] == jittered[1] == 5.0
    assert steady[0] == pytest.approx(2.5, abs=0.05) and jittered[0] == pytest.approx(4.9, abs=0.05)
    assert steady[2] == pytest.approx(2.9, abs=0.05) and jittered[2] == pytest.approx(2.2, abs=0.05)


def test_a_session_whose_steps_are_mostly_empty_is_read_not_stopped(
    bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The waves sweep kept only its c=16 steps' records and none of its scrapes: 40 of its 50
    steps have no requests. The script once zipped the session's steps with the observations
    (one per step with requests) and stopped on the mismatch; it pairs each observation with
    its own step now. No scrape, no histogram: no level to split, and no growth claimed."""
    out, figures = growth(bench, unpack_journal("waves-vllm", tmp_path / "w"), capsys)
    rows = [line.split() for line in out.splitlines() if re.match(r"\s+\d+\s+\d", line)]
    assert "client TTFT" in out and rows == [] and figures == []
