"""The frontier chart's layout (``model/search/frontier.py``): what bench prints and the knee
pane shows live. A point lies where its figures put it, the TPOT bound is the row of
1 / TPOT, each level meets or misses by the monotone fit, and a box too small draws nothing."""

from __future__ import annotations

from infmon.model.records.measures import SLO
from infmon.model.search.frontier import FrontierView, frontier_chart, frontier_view
from infmon.model.search.level_fit import Probe

SLO_ = SLO(tpot_s=0.05)  # 20 tok/s per user


def probe(c: float, tok_s: float, per_user: float, good: int, step: int = 0) -> Probe:
    return Probe(c, step, 100, good, tok_s, per_user, good * c / 100)


PROBES = [probe(4, 100, 40, 100), probe(16, 400, 30, 100), probe(64, 1000, 10, 20)]


def test_points_are_judged_by_the_fit_and_the_bound_is_one_over_tpot():
    view = frontier_view("slo", PROBES, SLO_, 0.9)
    assert [(p.label, p.meets) for p in view.points] == [
        ("c=4", True),
        ("c=16", True),
        ("c=64", False),
    ]
    assert view.bound_tok_s_per_user == 20.0
    assert view.summary == "search slo: c=4● c=16● c=64×"
    assert view.key(short=True) == "● meets  × misses  ─ TPOT 20/s"
    # a noisy pair: c=32 better than c=16 by chance is pooled by the fit, not "passes again"
    noisy = [*PROBES, probe(32, 700, 15, 95, 3), probe(24, 550, 25, 80, 4)]
    fitted = {p.label: p.meets for p in frontier_view("slo", noisy, SLO_, 0.9).points}
    assert fitted["c=24"] is False and fitted["c=32"] is False and fitted["c=16"] is True
    unjudged = frontier_view("knee", PROBES, SLO(), 0.9)
    assert {p.meets for p in unjudged.points} == {None} and "○" in unjudged.summary


def test_the_chart_puts_each_point_and_the_bound_where_their_figures_are():
    view = frontier_view("slo", PROBES, SLO_, 0.9)
    chart = frontier_chart(view, 50, 13)
    assert chart is not None and len(chart.lines) == 13
    rows = chart.lines[:11]
    axis = rows[0].index("┤")
    cols = len(rows[0]) - axis - 1  # 44: y labels 4 wide
    # y: 0 … 44 (40 × 1.1) over 11 rows; x: 0 … 1,050 (1,000 × 1.05) over 44 columns
    row_of = lambda y: round((1 - y / 44) * 10)  # noqa: E731
    col_of = lambda x: axis + 1 + round(x / 1050 * (cols - 1))  # noqa: E731
    assert chart.bound_row == row_of(20) == 5 and rows[5][axis + 1 :].count("─") >= 30
    for p, glyph in ((PROBES[0], "●"), (PROBES[1], "●"), (PROBES[2], "×")):
        assert rows[row_of(p.tok_s_per_user)][col_of(p.output_tok_s)] == glyph, p
    assert rows[row_of(40)][col_of(100) + 1 :].startswith("c=4")  # its level beside it
    assert chart.lines[12].strip().endswith("1,050") and "output tok/s" in chart.lines[12]


def test_nothing_is_drawn_without_figures_or_room():
    view = frontier_view("slo", PROBES, SLO_, 0.9)
    assert frontier_chart(view, 20, 13) is None and frontier_chart(view, 50, 4) is None
    assert frontier_chart(FrontierView("slo"), 50, 13) is None
    assert FrontierView("slo").summary == "search slo: measuring the first probe"


def test_a_point_never_hides_one_of_the_other_verdict():
    """c=144 meets the SLO and c=149 misses it, a few tok/s apart: one text cell; both show."""
    close = [
        probe(128, 2800, 21.5, 100),
        probe(149, 2810, 21.0, 20, 1),
        probe(144, 2805, 21.2, 95, 2),
    ]
    view = frontier_view("slo", close, SLO_, 0.9)
    chart = frontier_chart(view, 40, 10)
    assert chart is not None
    plot = "\n".join(chart.lines)
    assert plot.count("×") == 1 and 1 <= plot.count("●") <= 2
