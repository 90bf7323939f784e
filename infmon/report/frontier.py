"""The frontier chart as text for bench and reports (``model/search/frontier.py`` lays it out:
the monitor's knee pane shows the same chart live): each probe a point of tokens/s per user
against output tokens/s of all users, ``●`` meeting the SLO, ``×`` missing it, ``─`` the TPOT
bound. Plain text, so bench prints it after every probe and the report keeps it.
"""

from __future__ import annotations

from collections.abc import Sequence

from infmon.model.records.measures import SLO
from infmon.model.search.frontier import Y_TITLE, frontier_view
from infmon.model.search.frontier import frontier_chart as layout
from infmon.model.search.level_fit import Probe


def frontier_chart(
    probes: Sequence[Probe],
    slo: SLO,
    attainment: float,
    width: int = 72,
    height: int = 14,
    unit: str = "c=",
    goal: str = "slo",
) -> list[str]:
    """The chart's lines in ``width`` × ``height`` plus a title and a key (empty when no probe
    has both figures)."""
    view = frontier_view(goal, probes, slo, attainment, unit)
    chart = layout(view, width, height)
    if chart is None:
        return []
    return [Y_TITLE, *chart.lines, view.key()]
