"""The A/B verdict: speed ratio per level, the frontier move, quality non-inferiority, rules."""

from __future__ import annotations

import math

import pytest

from infmon.model.compare.ab_verdict import (
    AbabRuleError,
    AbabVerdict,
    FrontierMove,
    Trial,
    failures,
    parse_abab_rules,
    quality_check,
    speeds,
    speeds_tight,
    verdict_doc,
)


def _verdict(b_scale: float, frontier: FrontierMove, worse: int = 0) -> AbabVerdict:
    a = {4.0: [200.0, 204.0, 198.0], 16.0: [700.0, 712.0, 695.0]}
    wobble = (1.0, 1.01, 0.995)
    b = {lv: [x * b_scale * w for x, w in zip(v, wobble, strict=True)] for lv, v in a.items()}
    qa = {f"p{i}": True for i in range(48)}
    qb = {f"p{i}": i >= worse for i in range(48)}
    return AbabVerdict(
        "baseline", "fp8", 3, tuple(speeds(a, b)), frontier, quality_check(qa, qb, 0.05)
    )


def test_sentence_names_speed_frontier_and_quality():
    v = _verdict(1.31, FrontierMove(37, 52))
    s = v.sentence()
    assert s.startswith("fp8: 1.31× faster (")
    assert "at c=16, SLO frontier 37 → 52, quality not worse (margin 5 points)" in s
    h = v.headline
    assert h is not None and h.ratio.paired and h.ratio.n == 3 and h.ratio.beyond_noise


def test_slower_and_within_noise_are_said_so():
    assert "3.44× slower (" in _verdict(0.29, FrontierMove(37, None)).sentence()
    a = {16.0: [700.0, 712.0, 695.0]}
    b = {16.0: [705.0, 700.0, 699.0]}
    assert speeds(a, b)[0].text().startswith("no faster or slower beyond noise (")
    assert "SLO frontier 37 → none" in _verdict(0.29, FrontierMove(37, None)).sentence()
    assert FrontierMove(64, 64, True, True).text() == "SLO frontier ≥ 64 → ≥ 64"


def test_quality_non_inferiority_words():
    qa = {f"p{i}": True for i in range(48)}
    same = quality_check(qa, qa, 0.05)
    assert same.word == "not worse" and same.diff == 0 and same.low > -0.05
    # 48 probes, none discordant: an interval of about ±4 points, too wide for a 2-point margin
    assert quality_check(qa, qa, 0.02).word == "inconclusive"
    two = quality_check(qa, {f"p{i}": i >= 2 for i in range(48)}, 0.02)
    assert two.word == "inconclusive" and two.diff == pytest.approx(-2 / 48)
    assert "not shown to be not worse (-4.2 points" in two.text()
    many = quality_check(qa, {f"p{i}": i >= 24 for i in range(48)}, 0.02)
    assert many.word == "worse"
    wide = quality_check(qa, {f"p{i}": i >= 2 for i in range(48)}, 0.15)
    assert wide.word == "not worse"
    assert quality_check({}, {}, 0.02).n == 0


def test_fail_if_rules():
    rules = parse_abab_rules("frontier<-10%,speed<-5%,quality<-2%")
    assert [r.key for r in rules] == ["frontier", "speed", "quality"]
    bad = _verdict(0.29, FrontierMove(37, None), worse=24)
    lines = failures(rules, bad)
    assert len(lines) == 3 and lines[0].startswith("frontier<-10%: SLO frontier 37 → none (-100%)")
    good = _verdict(1.31, FrontierMove(37, 52))
    assert failures(parse_abab_rules("frontier<-10%,speed<-5%"), good) == []
    assert failures(parse_abab_rules("frontier<-10%"), _verdict(1.0, FrontierMove(37, 34))) == []
    with pytest.raises(AbabRuleError):
        parse_abab_rules("ttft_p90>+10%")


def test_doc_is_plain_json_data():
    v = _verdict(1.31, FrontierMove(37, 52))
    doc = verdict_doc(v, parse_abab_rules("frontier<-10%"))
    assert doc["schema"] == "infmon.abab/1" and doc["sentence"] == v.sentence()
    assert doc["frontier"] == {"a": 37, "b": 52, "a_open": False, "b_open": False,
                               "change": pytest.approx(15 / 37, abs=1e-4)}  # fmt: skip
    speed = doc["speed"]
    assert isinstance(speed, list) and speed[-1]["level"] == "c=16"
    assert doc["failed_rules"] == []
    nan = FrontierMove(None, 3)
    assert math.isnan(nan.change)


def test_until_ci_waits_for_three_rounds_and_a_narrow_ratio_at_every_level():
    a = {4.0: [200.0, 204.0, 198.0, 201.0], 16.0: [700.0, 712.0, 695.0, 705.0]}
    steady = {lv: [x * 1.3 for x in v] for lv, v in a.items()}
    assert not speeds_tight(speeds({k: v[:2] for k, v in a.items()},
                                   {k: v[:2] for k, v in steady.items()}), 0.05)  # fmt: skip
    assert speeds_tight(speeds(a, steady), 0.05)
    noisy = {4.0: [x * 1.3 for x in a[4.0]], 16.0: [700.0, 1100.0, 500.0, 900.0]}
    assert not speeds_tight(speeds(a, noisy), 0.05)  # one level's ratio still wide
    assert not speeds_tight([], 0.05)


def test_rounds_are_the_trials(tmp_path):
    from infmon.cli import build_parser
    from infmon.commands import CliError
    from infmon.commands.abab import _rounds

    parser = build_parser("method")

    def rounds(*extra: str) -> tuple[int, float | None]:
        return _rounds(parser.parse_args(["method", "http://127.0.0.1:1", "--abab", "a,b", *extra]))

    assert rounds() == (3, None)
    assert rounds("--repeat", "5") == (5, None) and rounds("--repeat", "1") == (1, None)
    assert rounds("--rounds", "4") == (4, None)
    assert rounds("--until-ci", "5%") == (10, 0.05)
    assert rounds("--until-ci", "5%", "--repeat", "6") == (6, 0.05)
    with pytest.raises(CliError, match="the rounds are the trials"):
        rounds("--repeat", "5", "--rounds", "3")
    with pytest.raises(CliError, match="at least 1"):
        rounds("--rounds", "0")
    with pytest.raises(CliError, match="wait on their speed ratio"):
        rounds("--until-ci", "5%", "--until-ci-on", "ttft_p50_ms")


def test_a_round_whose_client_was_late_is_left_out_with_its_pair_and_said():
    """Round 2's baseline step at c=16 had a late client (its timestamps carry the client's
    delay): that round's A and B leave the c=16 ratio, the other rounds stay paired, and the
    verdict says how many rounds it left out."""
    clean_a, clean_b = [700.0, 712.0, 695.0, 705.0], [917.0, 931.0, 912.0, 925.0]
    a = {16.0: [Trial(x, late=i == 1) for i, x in enumerate([700.0, 350.0, 712.0, 695.0])]}
    b = {16.0: [Trial(x) for x in (917.0, 640.0, 931.0, 912.0)]}
    at = speeds(a, b)[0]
    kept = speeds({16.0: [700.0, 712.0, 695.0]}, {16.0: [917.0, 931.0, 912.0]})[0]
    assert at.ratio == kept.ratio and at.ratio.paired and at.ratio.n == 3
    assert at.rounds == 4 and at.left_out == 1
    assert at.text().endswith("at c=16 (1 of 4 rounds left out: client late)")
    assert at.a.mean == pytest.approx((700 + 712 + 695) / 3)
    v = AbabVerdict("baseline", "fp8", 4, (at,), None, None)
    assert v.sentence().startswith("fp8: 1.31× faster (")
    assert v.sentence().endswith("(1 of 4 rounds left out: client late)")
    doc = verdict_doc(v)
    assert doc["speed"][0]["rounds"] == 4 and doc["speed"][0]["rounds_left_out"] == 1  # type: ignore[index]
    # no late round: nothing said, nothing left out
    none = speeds({16.0: clean_a}, {16.0: clean_b})[0]
    assert none.left_out == 0 and "left out" not in none.text()
    # late on each side in different rounds, one clean pair left: the clean trials, unpaired
    # (round 2's A is never paired with round 1's B)
    a2 = {16.0: [Trial(700.0, late=True), Trial(712.0), Trial(695.0)]}
    b2 = {16.0: [Trial(917.0), Trial(931.0, late=True), Trial(912.0)]}
    odd = speeds(a2, b2)[0]
    assert not odd.ratio.paired and odd.left_out == 2 and odd.rounds == 3
    assert odd.ratio.ratio == pytest.approx(math.exp(
        (math.log(917) + math.log(912)) / 2 - (math.log(712) + math.log(695)) / 2))  # fmt: skip


def test_a_top_level_whose_every_round_was_late_gives_the_headline_to_the_next_level_down():
    """On a loaded host every c=16 round had a late client: the verdict's speed is c=4's, with
    its interval, and c=16 is said as not measured and why (not a silent drop, not a ratio of
    late rounds)."""
    a = {4.0: [200.0, 204.0, 198.0], 16.0: [Trial(700.0, late=True)] * 3}
    b = {4.0: [248.0, 251.0, 246.0], 16.0: [Trial(900.0)] * 3}
    v = AbabVerdict("baseline", "fp8", 3, tuple(speeds(a, b)), FrontierMove(72, 99), None)
    assert v.headline is not None and v.headline.level == "c=4"
    assert v.sentence() == (
        f"fp8: {v.headline.ratio.ratio:.2f}× faster ({v.headline.ratio.low:.2f}–"
        f"{v.headline.ratio.high:.2f}) at c=4; c=16 not measured (3 of 3 rounds left out: "
        "client late), SLO frontier 72 → 99"
    )
    assert verdict_doc(v)["headline_level"] == "c=4"
