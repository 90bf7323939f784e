"""Quality probes: the built-in set, scoring, drift against a baseline, (HTTP runs: test_quality_http)."""

from __future__ import annotations

import json

import pytest

from infmon.quality.probes import Probe, ProbeFileError, builtin_probes, parse_probes
from infmon.quality.scoring import drift, first_divergence, is_correct, normalise


def test_builtin_set_is_large_and_self_consistent():
    probes = builtin_probes()
    assert len(probes) >= 40
    assert len({p.id for p in probes}) == len(probes)
    kinds = {p.id.split("-")[0] for p in probes}
    assert {"arith", "unit", "reverse", "capital", "json"} <= kinds
    for p in probes:
        if p.match == "exact":
            assert is_correct(p, p.expect)
        if p.id.startswith("json"):
            json.loads(p.expect)


@pytest.mark.parametrize(
    ("probe", "output", "ok"),
    [
        (Probe("a", "q", "42", "exact"), " 42\n", True),
        (Probe("a", "q", "42", "exact"), "42.", False),
        (Probe("c", "q", "Paris", "normalised"), "paris.", True),
        (Probe("c", "q", "Paris", "normalised"), "Lyon", False),
        (Probe("r", "q", r"^30(\.0+)?$", "regex"), "30.00", True),
        (Probe("r", "q", r"^30(\.0+)?$", "regex"), "300", False),
        (Probe("r", "q", "(", "regex"), "(", False),
    ],
)
def test_scoring(probe, output, ok):
    assert is_correct(probe, output) is ok


def test_normalise_keeps_braces():
    assert normalise('  "{A: 1}".  ') == "{a: 1}"


def test_drift_against_baseline():
    base = [
        {"id": "a", "output": "42"},
        {"id": "b", "output": "Paris"},
        {"id": "c", "output": "abcdef"},
        {"id": "d", "output": None},
    ]
    run = [
        {"id": "a", "output": "42 "},
        {"id": "b", "output": "Parus"},
        {"id": "c", "output": "abc"},
        {"id": "d", "output": "x"},
    ]
    d = drift(run, base)
    assert d.compared == 3
    assert d.agreement == pytest.approx(1 / 3)
    assert d.divergences == {"b": 3, "c": 3}
    assert d.length_ratio == pytest.approx((2 + 5 + 3) / (2 + 5 + 6))
    assert first_divergence("same", "same") is None


def test_bad_probe_file_is_a_clear_error():
    with pytest.raises(ProbeFileError, match="probes:2"):
        parse_probes('{"prompt": "a", "expect": "b"}\n{"prompt": "x"}\n')
    with pytest.raises(ProbeFileError, match="match must be"):
        parse_probes('{"prompt": "a", "expect": "b", "match": "fuzzy"}\n')
    assert parse_probes('{"prompt": "a", "expect": "b"}\n')[0].id == "p1"
