"""Errors a metric source reports; the poller turns them into data on the snapshot."""

from __future__ import annotations

from infmon.model.base.sanitize import clean


class SourceError(Exception):
    """A scrape failed. ``kind`` is one of the class constants; ``message`` is one line,
    sanitised (it may quote the server)."""

    CONNECT = "connect"
    TIMEOUT = "timeout"
    HTTP = "http"
    PARSE = "parse"
    NO_METRICS = "no_metrics"
    """The server has no metrics endpoint (HTTP 404, or 501 from llama.cpp without
    ``--metrics``): shown as "no server metrics"."""
    PROMETHEUS = "prometheus"
    TOO_LARGE = "too_large"
    """The page (or Prometheus answer) is over the size cap (``--metrics-max-bytes``)."""
    TOO_MANY_SERIES = "too_many_series"
    """The page has more series than the cap (``--metrics-max-series``): rejected unparsed."""
    TOO_COMPLEX = "too_complex"
    """The page is beyond the parser's other bounds (lines, line length, labels per series) or
    its parse ran past ``--metrics-timeout`` (``infmon.sources.exposition``)."""
    OTHER = "other"

    def __init__(self, kind: str, message: str) -> None:
        message = clean(message, 500)
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
