"""`infmon sim --fit` leaves out the steps the client self-check flagged: a starved client's
TTFT and TPOT are its own waits and its load what it could send, so a fit to them would learn
the client host, not the server. The session is a real one (``tests/fixtures/sessions/
starved-client-vllm.source.txt``): the real vLLM, 8 of 15 steps flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from infmon.cli import main
from infmon.commands.simfit import read_session
from tests.recorded import unpack_journal

FLAGGED = (2, 3, 4, 6, 7, 8, 9, 10)


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    return unpack_journal("starved-client-vllm", tmp_path_factory.mktemp("starved") / "session")


def test_flagged_steps_are_left_out_and_named(session: Path) -> None:
    late: list[str] = []
    obs, _ = read_session(session, "auto", late)
    assert [int(x.split()[1]) for x in late] == list(FLAGGED)
    assert late[0] == "step 2 (c=2)"
    # the unflagged: step 1 (c=1), step 5 (c=16) and round 3's five levels
    assert sorted(o.concurrency for o in obs) == [1, 1, 2, 4, 8, 16, 16]
    assert all(o.source == "both" for o in obs)


def test_the_fit_says_which_steps_it_left_out(session: Path, tmp_path: Path, capsys) -> None:
    profile = tmp_path / "p.toml"
    assert main(["sim", "--fit", str(session), "--profile-out", str(profile)]) == 0
    out = capsys.readouterr().out
    assert "left out step 2 (c=2), step 3 (c=4)" in out
    assert "the client self-check flagged their timestamps as late" in out
    assert profile.exists()
