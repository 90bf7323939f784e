"""search.json: built from a verdict, checked against its documented schema; the verdict line;
the frontier chart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import Probe
from infmon.model.search.policy import SearchSpec, Verdict, next_move
from infmon.model.search.search_json import (
    SEARCH_SCHEMA,
    SearchDocError,
    parse_search_doc,
    search_doc,
    verdict_line,
)
from infmon.report.frontier import frontier_chart

DOCS = Path(__file__).resolve().parents[2] / "docs" / "search.md"
SLO_ = SLO(ttft_s=0.5, tpot_s=0.05)


def _probe(c: float, step: int, frontier: float = 37.0) -> Probe:
    good = 100 if c <= frontier else 40
    tpot_s = 0.02 + 0.03 * c / frontier * 0.9
    return Probe(c, step, 100, good, 40 * c, 1 / tpot_s, good * c / 200, 300.0, tpot_s * 1e3,
                 margin=(c / (frontier + 0.5)) ** 2)  # fmt: skip


def _search(spec: SearchSpec) -> tuple[Verdict, list[Probe]]:
    probes: list[Probe] = []
    while not isinstance(move := next_move(spec, probes), Verdict):
        probes.append(_probe(move.level, len(probes)))
    return move, probes


def test_doc_round_trips_through_json_and_the_schema_check():
    spec = SearchSpec("slo", lo=1, hi=256)
    v, probes = _search(spec)
    doc = search_doc(spec, SLO_, v, probes)
    back = parse_search_doc(json.loads(json.dumps(doc, allow_nan=False)))
    assert back["schema"] == SEARCH_SCHEMA and back["status"] == "found"
    assert back["found"] is not None and back["found"]["level"] == 37
    assert back["bound"] is not None and back["bound"]["level"] == 38
    assert back["found"]["attainment"] == 1.0 and back["bound"]["attainment"] == 0.4
    assert 37 <= back["estimate"] <= 38 and back["confidence"] > 0.99
    assert len(back["probes"]) == len(probes) == v.probes
    assert back["line"] == verdict_line(spec, SLO_, v)
    assert "c=37" in back["line"] and "ttft≤500ms, tpot≤50ms" in back["line"]


def test_schema_check_rejects_wrong_documents():
    spec = SearchSpec("slo", lo=1, hi=256)
    v, probes = _search(spec)
    good = json.loads(json.dumps(search_doc(spec, SLO_, v, probes)))
    for broken in (
        {**good, "schema": "infmon.search/0"},
        {k: x for k, x in good.items() if k != "confidence"},
        {**good, "budget": "12"},
        {**good, "status": "maybe"},
        {**good, "found": {"level": 3}},
        {**good, "probes": [{"level": 1}]},
        [],
    ):
        with pytest.raises(SearchDocError):
            parse_search_doc(broken)


def test_docs_name_every_key():
    text = DOCS.read_text(encoding="utf-8")
    spec = SearchSpec("slo", lo=1, hi=256)
    v, probes = _search(spec)
    doc = search_doc(spec, SLO_, v, probes)
    keys = set(doc) | set(doc["found"] or {}) | set(doc["probes"][0])
    missing = [k for k in keys if f"`{k}`" not in text]
    assert not missing, missing


def test_below_range_line_says_none():
    spec = SearchSpec("slo", lo=64, hi=256)
    v, probes = _search(spec)
    assert v.status == "below_range"
    assert "none (no level meets the SLO: c=64 already misses it" in verdict_line(spec, SLO_, v)
    assert (
        parse_search_doc(json.loads(json.dumps(search_doc(spec, SLO_, v, probes))))["found"] is None
    )


def test_frontier_chart_marks_each_probe_and_the_tpot_line():
    probes = [_probe(c, i) for i, c in enumerate((1, 4, 16, 32, 64))]
    lines = frontier_chart(probes, SLO_, 0.9, width=60, height=10)
    text = "\n".join(lines)
    plot = "\n".join(lines[:-1])  # the last line is the key
    assert plot.count("●") == 4 and plot.count("×") == 1
    assert "─" * 20 in text and "TPOT bound (20 tok/s per user)" in text
    assert "c=64" in text
    assert frontier_chart([], SLO_, 0.9) == []
