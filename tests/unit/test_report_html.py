"""The HTML and Markdown reports as a reader sees them (issue 17, finding 11): the operator's
mark notes shown, step dividers named by level, the knee row highlighted, cells that do not
wrap mid-figure, E2EL in seconds, right-axis titles inside the chart."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

from infmon.report import write_reports
from infmon.report.fmt import mark_text
from infmon.report.html import render_html
from infmon.report.markdown import render_markdown
from tests.synthetic import SyntheticServer, write_synthetic_session


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict:
    session = tmp_path_factory.mktemp("html") / "session"
    write_synthetic_session(
        session, concurrencies=(1, 4, 16, 64), step_duration_s=6.0, server=SyntheticServer()
    )
    write_reports(session)
    d = json.loads((session / "report.json").read_text())
    # What the monitor's journal holds for ``m`` (a note) and ``b`` (the step made baseline).
    d["events"] += [
        {"kind": "mark", "t_s": 7.5, "note": "switched the <b>LoRA</b>"},
        {"kind": "baseline", "t_s": 8.0, "step": 2},
    ]
    return d


def test_mark_notes_and_step_levels_in_markdown(doc: dict) -> None:
    md = render_markdown(doc)
    assert "· mark: switched the <b>LoRA</b>" not in md  # escaped, not raw HTML
    assert re.search(r"· mark: switched the .*LoRA", md)
    assert "· baseline: step 2" in md


def test_mark_notes_step_dividers_and_knee_row_in_html(doc: dict) -> None:
    page = render_html(doc)
    assert "mark: switched the &lt;b&gt;LoRA&lt;/b&gt;" in page
    assert "baseline: step 2" in page
    assert '<text x="' in page and ">c=16</text>" in page  # dividers named by level
    assert doc["knee"] is not None
    knee_rows = re.findall(r'<tr class="knee"><td>([^<]*)</td>', page)
    assert knee_rows == [str(doc["knee"]["concurrency"])]
    assert "white-space:nowrap" in page and 'class="wide"' in page


def test_e2el_in_seconds_and_right_titles_inside_the_chart(doc: dict) -> None:
    page = render_html(doc)
    assert "E2EL p50 (s)" in page and "E2EL p50 (ms)" not in page
    for svg in re.findall(r"<svg .*?</svg>", page, flags=re.S):
        root = ET.fromstring(svg)
        width = float(root.attrib["width"])
        for text in root.iter("{http://www.w3.org/2000/svg}text"):
            transform = text.attrib.get("transform", "")
            if "rotate" in transform and float(text.attrib["x"]) > width / 2:
                # Rotated by -90° the glyphs grow towards -x from the baseline: font-size 11px
                # with 3 px of descent leaves the title inside the chart when x <= width - 4.
                assert "rotate(-90" in transform, transform
                assert float(text.attrib["x"]) <= width - 4


def test_each_event_reads_as_its_line() -> None:
    """The writer reads what the journal stores: ``note`` for a mark."""
    assert mark_text({"kind": "mark", "note": "n"}) == "mark: n"
    assert mark_text({"kind": "mark"}) == "mark"
    assert mark_text({"kind": "step_begin", "mode": "rate", "level": 2.0}) == "2 req/s"
    assert mark_text({"kind": "step_begin", "mode": "closed", "level": 16}) == "c=16"
