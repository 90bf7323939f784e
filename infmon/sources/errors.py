"""Errors a metric source reports; the poller turns them into data on the snapshot."""

from __future__ import annotations


class SourceError(Exception):
    """A scrape failed. ``kind`` is one of the class constants; ``message`` is one line."""

    CONNECT = "connect"
    TIMEOUT = "timeout"
    HTTP = "http"
    PARSE = "parse"
    NO_METRICS = "no_metrics"
    """The server has no metrics endpoint (HTTP 404): shown as "no server metrics"."""
    PROMETHEUS = "prometheus"
    OTHER = "other"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
