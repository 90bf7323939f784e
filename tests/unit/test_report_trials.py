"""The report's repeated-trials section: levels held more than once, with intervals and CV."""

from __future__ import annotations

from typing import Any

from infmon.report.markdown import render_markdown
from infmon.report.trials import markdown_lines, rows


def _step(c: int, tok: float, complete: bool = True) -> dict[str, Any]:
    return {
        "concurrency": c,
        "output_throughput_tok_s": tok,
        "ttft_ms": {"p90": 100.0 + tok / 100},
        "tpot_ms": {"p90": 20.0},
        "complete": complete,
    }


def test_levels_held_twice_or_more_get_a_row():
    doc: Any = {"steps": [_step(4, 200), _step(16, 700), _step(4, 210), _step(16, 690),
                          _step(16, 705), _step(64, 900), _step(64, 1, complete=False)]}  # fmt: skip
    got = rows(doc)
    assert [r[0] for r in got] == ["c=4", "c=16"] and [r[1] for r in got] == ["2", "3"]
    assert got[1][2].startswith("698.3 (") and "cv 1.1%" in got[1][2]
    assert got[1][4] == "—" or "cv 0.0%" in got[1][4]
    assert got[0][5].startswith("±")


def test_no_section_without_repeats():
    doc: Any = {"steps": [_step(4, 200), _step(16, 700)]}
    assert markdown_lines(doc, lambda h, r: []) == []
    assert "## Repeated trials" not in render_markdown(doc)
