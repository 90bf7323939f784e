"""How far a level's rounds moved (``infmon.sim.rounds``), on a real session whose server wandered:
the real vLLM of 4 Dec (``tests/fixtures/sessions/wandering-vllm.source.txt``), c=2 TPOT 2.40,
3.29 and 4.44 ms in three rounds of one bench run. ``sim --fit`` prints each level's rounds,
judges the held-out levels against the mean of their rounds, and says the rounds wandered."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from infmon.cli import main
from infmon.commands.simfit_read import read_session
from infmon.commands.simfit_rounds import render_held_rounds, session_wander, wander_warning
from infmon.sim.observation import Observation
from infmon.sim.rounds import (
    SAME_PACE,
    WANDER_CV,
    HeldLevel,
    PaceGap,
    Rounds,
    level_rounds,
    pace_gaps,
    round_index,
    whose_wander,
)
from tests.recorded import unpack_journal


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    return unpack_journal("wandering-vllm", tmp_path_factory.mktemp("wander") / "session")


@pytest.fixture(scope="module")
def observations(session: Path) -> list[Observation]:
    obs, _ = read_session(session, "auto", [])
    return obs


def test_spread_and_cv_of_rounds() -> None:
    r = Rounds("s", 2, "tpot", (2.0, 3.0, 4.0))
    assert r.mean == 3.0
    assert r.spread == 2.0
    assert math.isclose(r.cv, 1.0 / 3.0)
    assert r.wandered
    steady = Rounds("s", 2, "tpot", (3.0, 3.1, 2.95))
    assert steady.cv < WANDER_CV and not steady.wandered
    assert math.isnan(Rounds("s", 2, "tpot", (3.0,)).cv)
    assert not Rounds("s", 2, "tpot", (3.0,)).wandered


def test_each_level_of_the_real_session_has_its_three_rounds(observations) -> None:
    rounds = level_rounds(observations)
    assert {(r.concurrency, r.figure) for r in rounds} == {
        (c, f) for c in (1, 2, 4, 8, 16) for f in ("tpot", "ttft_p50", "tok_s")
    }
    assert all(len(r.values) == 3 for r in rounds)
    c2 = next(r for r in rounds if r.concurrency == 2 and r.figure == "tpot")
    assert [round(v * 1e3, 2) for v in c2.values] == [2.40, 3.29, 4.44]
    assert c2.wandered and 1.8 < c2.spread < 1.9
    c8 = next(r for r in rounds if r.concurrency == 8 and r.figure == "tok_s")
    assert not c8.wandered  # 1,612, 1,566, 1,507 tok/s: CV 3%


def test_a_level_run_once_has_no_rounds(observations) -> None:
    once = [o for o in observations if o.concurrency != 2] + [
        next(o for o in observations if o.concurrency == 2)
    ]
    assert 2 not in {r.concurrency for r in level_rounds(once)}


def test_the_real_wander_was_the_servers_pace(observations) -> None:
    """vLLM's own per-request TPOT moved with the client's in every round: its pace moved."""
    gaps = pace_gaps(observations)
    assert [g.concurrency for g in gaps] == [1, 2, 4, 8, 16]
    assert all(len(g.gaps) == 3 for g in gaps)
    assert max(g.worst for g in gaps) < 0.01  # within 1% in all 15 rounds, over 1.85x of wander
    wandered = [r for r in level_rounds(observations) if r.wandered]
    assert "the server's pace moved, not this client's reading" in whose_wander(wandered, gaps)


def test_a_client_that_drew_apart_from_the_server_is_named() -> None:
    wandered = [Rounds("s", 16, "tpot", (5.0e-3, 8.0e-3, 5.2e-3))]
    server = (4.98e-3, 5.7e-3, 5.25e-3)  # the server's own moved 14%
    apart = [PaceGap("s", 16, (0.005, 0.40, -0.01), server)]  # one round read 40% slower
    said = whose_wander(wandered, apart)
    assert "drew apart by up to 40% in a round (c=16)" in said
    assert "this client's reading" in said
    assert "the server's pace moved" not in said
    assert SAME_PACE < 0.40


def test_a_few_percent_of_client_under_a_servers_wander_is_still_the_servers_pace() -> None:
    """A loaded client host reads one round 4.5% off the server's own TPOT while the server's
    own moved 1.96x between rounds (the simulator's ``wander`` fault beside a second test's
    browser in CI): the wander is the server's pace, and the client's share is said."""
    wandered = [Rounds("s", 1, "tpot", (17.0e-3, 29.6e-3, 22.8e-3, 17.1e-3, 35.6e-3))]
    server = (17.0e-3, 29.5e-3, 22.8e-3, 17.1e-3, 34.1e-3)
    gaps = tuple(c / v - 1 for c, v in zip(wandered[0].values, server, strict=True))
    g = PaceGap("s", 1, gaps, server)
    assert not g.same_pace and g.mostly_server
    assert 0.04 < g.worst < 0.05 and 1.0 < g.server_moved < 1.01
    said = whose_wander(wandered, [g])
    assert "moved 2.01x between rounds (c=1)" in said
    assert "drew apart from it by at most 4.4% in a round (c=1)" in said
    assert "the server's pace moved, and this client's reading added a little" in said
    # the same gaps beside a server whose own TPOT moved 10% are the client's reading
    held = PaceGap("s", 1, g.gaps, (17.0e-3, 18.7e-3, 18.7e-3, 17.0e-3, 18.7e-3))
    assert not held.mostly_server
    assert "this client's reading (a loaded client host" in whose_wander(wandered, [held])


def test_without_the_servers_timings_the_session_cannot_tell(observations) -> None:
    """A vLLM without --enable-per-request-metrics: no server TPOT, no verdict either way."""
    bare = [replace(o, server_tpot_s=math.nan) for o in observations]
    assert pace_gaps(bare) == []
    wandered = [r for r in level_rounds(bare) if r.wandered]
    assert wandered
    assert "cannot tell the server's pace from this client's reading" in whose_wander(wandered, [])
    # one level with the server's timings does not speak for another that wandered
    c1 = [g for g in pace_gaps(observations) if g.concurrency == 1]
    assert "cannot tell" in whose_wander(wandered, c1)


def test_a_bench_of_rounds_ends_by_saying_whose_wander_it_was(session, tmp_path) -> None:
    """What ``bench --repeat`` prints after its reports on this session: the same warning as
    the fit's, with what it means for the rounds themselves."""
    said = session_wander(session)
    assert said is not None
    assert said.startswith("warning: rounds of one level wandered in 13 of 15 figures")
    assert "worst c=2 TPOT: 1.85x between rounds (CV 30%)" in said
    assert "the server's pace moved, not this client's reading of it" in said
    assert "A comparison of these rounds carries that much noise" in said
    assert session_wander(tmp_path) is None  # not a session: nothing to say, no error


def test_a_fit_to_the_servers_clock_alone_reads_its_rounds_and_cannot_tell(session) -> None:
    """``--targets server``: the rounds are the server's own TPOT; with no client TPOT beside
    it, whose the wander was is not said (this once raised a KeyError)."""
    server, _ = read_session(session, "server", [])
    c2 = next(r for r in level_rounds(server) if r.concurrency == 2 and r.figure == "tpot")
    assert [round(v * 1e3, 2) for v in c2.values] == [2.41, 3.30, 4.44]  # the server's own
    assert pace_gaps(server) == []
    said = wander_warning(server, "")
    assert said is not None and "cannot tell the server's pace from this client's" in said


def test_levels_run_once_have_no_wander_to_say(observations) -> None:
    """The same server's levels, one round each: no level has rounds to compare."""
    first: dict[int, Observation] = {}
    for o in observations:
        first.setdefault(o.concurrency, o)
    assert wander_warning(list(first.values()), "") is None
    assert wander_warning(observations, "") is not None


@pytest.mark.slow  # one fit of the real session: ~15 s
def test_the_fit_prints_rounds_held_out_means_and_the_wander(
    session, observations, tmp_path, capsys
) -> None:
    assert main(["sim", "--fit", str(session), "--holdout", "8,16",
                 "--profile-out", str(tmp_path / "p.toml")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "  c=2 session: TPOT 2.40, 3.29, 4.44 ms (CV 30%)" in out
    assert "  waves 1.0, 1.0, 1.0" in out  # c=1: one user, one request at a time
    assert "held out, against the mean of each level's rounds (±: that mean's 95% interval" in out
    assert "  the rounds know these means to ±" in out
    held = [line for line in out.splitlines() if "(3 rounds):" in line]
    assert [line.split()[0] for line in held] == ["c=8", "c=16"]
    # each held-out line's TPOT error is the forecast against the mean of the three rounds
    per_round = [
        line for line in out.splitlines() if line.startswith("  c=16 ") and "tpot " in line
    ]
    errs = [float(line.split("tpot ")[1].split("%")[0]) / 100 for line in per_round]
    measured = [o.tpot_s for o in observations if o.concurrency == 16]
    forecast = (1 + errs[0]) * measured[0]
    mean_err = forecast / statistics.fmean(measured) - 1
    shown = float(held[1].split("TPOT ")[1].split("%")[0]) / 100
    assert abs(shown - mean_err) < 0.002  # the per-round line is rounded to 0.1%
    assert "warning: rounds of one level wandered" in out
    assert "worst c=2 TPOT: 1.85x between rounds" in out
    assert "the server's pace moved, not this client's reading of it" in out


LABEL = {"tpot": "TPOT", "ttft_p50": "TTFT p50", "tok_s": "tok/s"}


def test_a_held_out_error_is_set_beside_how_well_its_rounds_know_the_mean() -> None:
    """Rounds 2, 3, 4 (mean 3, sd 1): the mean's 95% interval is ±t(2) x 1 / sqrt(3) / 3 =
    ±83% of it; a forecast 25% off is inside, one 90% off is beyond and is the model's."""
    inside = HeldLevel("s", 16, (("tpot", 0.25),), 3, (("tpot", (2.0, 3.0, 4.0)),))
    lines = render_held_rounds([inside], LABEL)
    assert lines[1] == "  c=16 s (3 rounds): TPOT +25.0% (±83%)"
    assert not any("beyond" in line for line in lines)
    assert "the rounds know these means to ±83%-83%" in lines[-1]
    beyond = HeldLevel("s", 16, (("tpot", 0.9),), 3, (("tpot", (2.0, 3.0, 4.0)),))
    lines = render_held_rounds([beyond], LABEL)
    assert lines[1] == "  c=16 s (3 rounds): TPOT +90.0% (±83%, beyond)"
    assert "beyond the rounds' own interval: c=16 TPOT +90% (±83%): the model missed" in lines[2]


def test_the_held_out_means_are_counted_against_the_forecasts_band() -> None:
    """A forecast 25% over a mean with a ±30% band holds it (the mean is 20% of the forecast
    below it); one half the mean with a ±50% band does not (the mean is the forecast again)."""
    level = HeldLevel(
        "s", 16, (("tpot", 0.25), ("tok_s", -0.5)), 3, (), (("tpot", 0.3), ("tok_s", 0.5))
    )
    assert level.inside_band() == {"tpot": True, "tok_s": False}
    lines = render_held_rounds([level], LABEL)
    assert "  the forecast's 95% band holds the mean of rounds in 1 of 2 figures" in lines


def test_steady_rounds_make_a_narrow_interval_that_a_miss_falls_outside() -> None:
    """Ten rounds within 1% of each other know their mean to well under ±1%: a forecast 5% off
    is the model's, where the same miss on wandering rounds would be the hour's."""
    steady = tuple(3.0 + 0.01 * (i % 3) for i in range(10))
    h = HeldLevel("s", 8, (("tok_s", -0.05),), 10, (("tok_s", steady),))
    lines = render_held_rounds([h], LABEL)
    assert "tok/s -5.0% (±0%, beyond)" in lines[1]
    assert "c=8 tok/s -5% (±0%)" in lines[2]


def test_every_round_of_the_real_session_knows_its_wave(observations) -> None:
    """One user sends one request at a time (c=1: waves of 1); at c=16 they bunch."""
    waves = {c: [o.arrival_wave for o in observations if o.concurrency == c] for c in (1, 16)}
    assert waves[1] == [1.0, 1.0, 1.0]
    assert all(2.0 < w < 16 for w in waves[16])


def test_a_round_is_a_steps_place_among_its_levels_steps(observations) -> None:
    index = round_index(observations)
    by: dict[int, list[int]] = {}
    for o, r in zip(observations, index, strict=True):
        by.setdefault(o.concurrency, []).append(r)
    assert by == {c: [0, 1, 2] for c in (1, 2, 4, 8, 16)}
