"""Parse the Prometheus text exposition format (and OpenMetrics) into plain samples.

Uses ``prometheus_client``'s own parsers (the library vLLM and SGLang expose with), which
take ~6 ms for a 53 kB vLLM page (``bench/scrape.py``). ``*_created`` series are dropped;
OpenMetrics exemplars are ignored. Anything unparseable raises ``ExpositionError`` only;
a page with more series than ``max_series`` raises ``TooManySeries`` (one) before it is parsed,
so a label-cardinality explosion costs a line count, not seconds of parsing. Metric and label
names and label values are untrusted text: control and bidi characters in them come out
escaped (``infmon.model.sanitize``), so nothing downstream sees them raw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from infmon.model.sanitize import clean, is_clean

MAX_SERIES = 100_000
"""Default cap on the series of one page (``--metrics-max-series``)."""
MAX_LABEL_CHARS = 1024
"""A metric name, label name or value longer than this is cut (with a marker)."""


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format (the one error parsing can raise)."""


class TooManySeries(ExpositionError):
    """The page has more series than the cap: rejected whole, unparsed."""

    def __init__(self, series: int, cap: int) -> None:
        super().__init__(
            f"page has {series:,} series, over the cap of {cap:,} (--metrics-max-series)"
        )
        self.series, self.cap = series, cap


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    """The exposed sample name, e.g. ``vllm:prompt_tokens_total`` or ``…_bucket``."""
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Page:
    """One scraped page: samples indexed by exposed name (``_created`` series left out)."""

    by_name: Mapping[str, tuple[Sample, ...]] = field(default_factory=dict)
    declared: frozenset[str] = frozenset()
    """Family names from ``# HELP`` / ``# TYPE`` lines, with or without samples (a vLLM page
    before its first request declares families it has no values for yet)."""

    def get(self, name: str) -> tuple[Sample, ...]:
        return self.by_name.get(name, ())

    def has(self, name: str) -> bool:
        return name in self.by_name

    def declares(self, name: str) -> bool:
        """A sample ``name`` has values, or its family is declared (``x_total`` → ``x``)."""
        if name in self.by_name or name in self.declared:
            return True
        base = name.rsplit("_", 1)[0] if name.endswith(_SUFFIXES) else name
        return base in self.declared

    @property
    def names(self) -> Iterable[str]:
        return self.by_name.keys()

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_name.values())


_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def page_from_samples(samples: Iterable[Sample], declared: Iterable[str] = ()) -> Page:
    """Index samples by name, dropping ``_created`` series (a start timestamp, not a value)."""
    index: dict[str, list[Sample]] = {}
    for s in samples:
        if s.name.endswith("_created"):
            continue
        index.setdefault(s.name, []).append(s)
    return Page({k: tuple(v) for k, v in index.items()}, frozenset(declared))


def count_series(text: str) -> int:
    """Sample lines of a page (not comments, not blank): what the series cap counts."""
    return sum(
        1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


def parse_exposition(text: str | bytes, max_series: int | None = MAX_SERIES) -> Page:
    """Parse a ``/metrics`` page; raise ``ExpositionError`` if it is not exposition text,
    ``TooManySeries`` if it has more than ``max_series`` series (None: no cap)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"not UTF-8 text (byte {exc.start:,})") from None
    if "\x00" in text:
        raise ExpositionError("NUL byte in exposition text")
    if max_series is not None and text.count("\n") >= max_series:
        n = count_series(text)
        if n > max_series:
            raise TooManySeries(n, max_series)
    is_openmetrics = text.rstrip().endswith("# EOF")
    parser = openmetrics_families if is_openmetrics else text_families
    # Label values hold a raw newline only through the ``\\n`` escape; long lines may hold
    # long values. Otherwise a clean page has clean names and values: no per-label pass.
    plain = is_clean(text, multiline=True) and "\\n" not in text and not _has_long_line(text)
    try:
        families = list(parser(text))
        samples = [
            Sample(s.name, s.labels, float(s.value)) for fam in families for s in fam.samples
        ]
    except Exception as exc:  # the parsers raise ValueError, KeyError, IndexError…
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ExpositionError(f"not Prometheus exposition text: {clean(first, 200)}") from None
    names = [f.name if plain else clean(f.name, MAX_LABEL_CHARS) for f in families]
    return page_from_samples(samples if plain else [_clean_sample(s) for s in samples], names)


def _has_long_line(text: str) -> bool:
    return (
        len(text) > MAX_LABEL_CHARS
        and max(map(len, text.splitlines()), default=0) > MAX_LABEL_CHARS
    )


def clean_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Label names and values with control characters escaped and lengths bounded."""
    return {clean(k, MAX_LABEL_CHARS): clean(v, MAX_LABEL_CHARS) for k, v in labels.items()}


def _clean_sample(s: Sample) -> Sample:
    return Sample(clean(s.name, MAX_LABEL_CHARS), clean_labels(s.labels), s.value)
