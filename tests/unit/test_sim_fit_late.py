"""`infmon sim --fit` leaves out the steps the client self-check flagged: a starved client's
TTFT and TPOT are its own waits and its load what it could send, so a fit to them would learn
the client host, not the server. The session is a real one (``tests/fixtures/sessions/
starved-client-vllm.source.txt``): the real vLLM, 8 of 15 steps flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from infmon.cli import main
from infmon.commands.simfit_read import read_session
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


def test_the_recorded_servers_limits_are_typed_and_a_hostile_value_is_unknown(session) -> None:
    """``read_session`` gives the server's limits as ``ServerLimits`` (the real vLLM's
    ``cache_config_info``), and ``base_config`` replays with them; a count a server sent as a
    flag, a string, zero or a negative is unknown, never a limit, and the next session's or the
    simulator's default is taken."""
    from infmon.commands.simfit_read import ServerLimits, base_config

    _, limits = read_session(session, "auto", [])
    assert limits.kv_num_gpu_blocks and limits.kv_num_gpu_blocks > 0
    assert limits == ServerLimits(8192, 128, 1024)  # vLLM on CPU: blocks of 128 tokens
    cfg = base_config([limits], max_num_seqs=8)
    assert (cfg.num_gpu_blocks, cfg.block_size) == (8192, 128)
    assert cfg.max_model_len == limits.max_model_len and cfg.max_num_seqs == 8
    hostile = ServerLimits.of(
        {"kv_num_gpu_blocks": True, "kv_block_size_tokens": "16", "max_model_len": -5}
    )
    assert hostile == ServerLimits() == ServerLimits.of({"kv_num_gpu_blocks": 0})
    cfg = base_config([hostile, limits])
    assert (cfg.num_gpu_blocks, cfg.block_size, cfg.max_model_len) == (8192, 128, 1024)
    default = base_config([hostile])
    assert (default.num_gpu_blocks, default.block_size, default.max_model_len) == (None, 16, 32768)
