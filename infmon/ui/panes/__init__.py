"""One pane per concern; each renders one part of the ``DashboardSnapshot`` and computes nothing."""

from infmon.ui.panes.base import Pane
from infmon.ui.panes.events import EventsPane
from infmon.ui.panes.gpu import GpuPane
from infmon.ui.panes.header import HeaderBar, HintBar
from infmon.ui.panes.knee import KneePane
from infmon.ui.panes.latency import LatencyPane
from infmon.ui.panes.server import KvPane, ServerPane
from infmon.ui.panes.spec import SpecPane
from infmon.ui.panes.throughput import ThroughputPane

__all__ = [
    "EventsPane",
    "GpuPane",
    "HeaderBar",
    "HintBar",
    "KneePane",
    "KvPane",
    "LatencyPane",
    "Pane",
    "ServerPane",
    "SpecPane",
    "ThroughputPane",
]
