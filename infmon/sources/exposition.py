"""Parse the Prometheus text exposition format (and OpenMetrics) into plain samples.

Uses ``prometheus_client``'s own parsers (the library vLLM and SGLang expose with), which
take ~6 ms for a 53 kB vLLM page (``bench/scrape.py``). ``*_created`` series are dropped;
OpenMetrics exemplars are ignored. Anything unparseable raises ``ExpositionError`` only;
a page with more series than ``max_series`` raises ``TooManySeries`` (one) before it is parsed,
so a label-cardinality explosion costs a line count, not seconds of parsing. Metric and label
names and label values are untrusted text: control and bidi characters in them come out
escaped (``infmon.model.base.sanitize``), so nothing downstream sees them raw.

The parser's cost is bounded too (``TooComplex``), checked before parsing in one linear pass:
lines (4 per allowed series, plus 10,000: 16 MB of blank lines held 240 MB and 6.6 s), the
longest line (64 KiB) and labels per series (128; the parser is quadratic in them: 256k labels
on one series took 62 s); and during parsing, a budget of the parsing thread's own CPU time
(``cpu_s``, checked every 32 lines): a page that costs that much is too complex whatever the
host. The budget is CPU, not wall time: on a host whose cores the server's processes fill, the
scrape thread waits for a core and a 10 ms parse took over 5 s of wall time (a real vLLM on this
2-core machine at c=1), which a wall-clock deadline misread as a hostile page and reported
as the server's metrics unusable. A parse that gets almost no CPU for ``STARVED_S`` is
stopped as ``ParseStarved``, which says it is the host, not the page.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.openmetrics.parser import (
    text_fd_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_fd_to_metric_families as text_families

from infmon.model.base.sanitize import clean, is_clean

MAX_SERIES = 100_000
"""Default cap on the series of one page (``--metrics-max-series``)."""
MAX_LABEL_CHARS = 1024
"""A metric name, label name or value longer than this is cut (with a marker)."""
MAX_LINE_CHARS = 64 * 1024
"""The longest line a page may have (a vLLM line is under 1 KiB)."""
MAX_LABELS = 128
"""Labels one series may have (vLLM's have at most a dozen)."""
EXTRA_LINES = 10_000
"""Lines a page may have beyond 4 per allowed series (HELP, TYPE, blank lines)."""
_LINES_PER_CHECK = 32


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format (the one error parsing can raise)."""


class TooComplex(ExpositionError):
    """The page is beyond what the parser is given (lines, a line's length, labels per series,
    time): rejected, with the reason."""


class ParseStarved(ExpositionError):
    """The parse got next to no CPU for ``STARVED_S`` of wall time: this host is too busy to
    give infmon's scrape thread a core (the page is not at fault)."""


STARVED_S = 60.0
"""Wall time after which a parse still within its CPU budget is stopped as ``ParseStarved``."""


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
    """Index samples by name, dropping ``_created`` series (a start timestamp, not a value)
    and repeats of a series (same name and labels: Prometheus refuses such a page; the first
    is kept, so a repeat is never summed into a total)."""
    index: dict[str, list[Sample]] = {}
    seen: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    for s in samples:
        if s.name.endswith("_created"):
            continue
        key = (s.name, frozenset(s.labels.items()))
        if key in seen:
            continue
        seen.add(key)
        index.setdefault(s.name, []).append(s)
    return Page({k: tuple(v) for k, v in index.items()}, frozenset(declared))


def count_series(text: str) -> int:
    """Sample lines of a page (not comments, not blank): what the series cap counts."""
    return sum(
        1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


def parse_exposition(
    text: str | bytes, max_series: int | None = MAX_SERIES, cpu_s: float | None = None
) -> Page:
    """Parse a ``/metrics`` page; raise ``ExpositionError`` if it is not exposition text,
    ``TooManySeries`` if it has more than ``max_series`` series (None: no cap), ``TooComplex``
    past the other bounds or once parsing has taken ``cpu_s`` of this thread's CPU time (None:
    no budget), ``ParseStarved`` when it got next to none for ``STARVED_S``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"not UTF-8 text (byte {exc.start:,})") from None
    if "\x00" in text:
        raise ExpositionError("NUL byte in exposition text")
    check_shape(text, max_series)
    is_openmetrics = text.rstrip().endswith("# EOF")
    parser = openmetrics_families if is_openmetrics else text_families
    # Label values hold a raw newline only through the ``\\n`` escape; long lines may hold
    # long values. Otherwise a clean page has clean names and values: no per-label pass.
    plain = is_clean(text, multiline=True) and "\\n" not in text and not _has_long_line(text)
    try:
        families = list(parser(_Lines(text, cpu_s)))  # type: ignore[arg-type]
        samples = [
            Sample(s.name, s.labels, float(s.value)) for fam in families for s in fam.samples
        ]
    except (TooComplex, ParseStarved):
        raise
    except Exception as exc:  # the parsers raise ValueError, KeyError, IndexError…
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ExpositionError(f"not Prometheus exposition text: {clean(first, 200)}") from None
    names = [f.name if plain else clean(f.name, MAX_LABEL_CHARS) for f in families]
    return page_from_samples(samples if plain else [_clean_sample(s) for s in samples], names)


def check_shape(text: str, max_series: int | None) -> None:
    """The bounds checked before parsing (module docstring), cheapest first."""
    lines = text.count("\n") + 1
    if max_series is not None:
        if lines > 4 * max_series + EXTRA_LINES:
            raise TooComplex(
                f"page has {lines:,} lines, over the cap of {4 * max_series + EXTRA_LINES:,} "
                "(4 per --metrics-max-series, plus 10,000)"
            )
        if lines > max_series:
            n = count_series(text)
            if n > max_series:
                raise TooManySeries(n, max_series)
    if len(text) > MAX_LINE_CHARS and (m := _LONG_LINE.search(text)):
        end = text.find("\n", m.start())
        size = (len(text) if end < 0 else end) - m.start()
        raise TooComplex(f"a line of {size:,} characters, over the cap of {MAX_LINE_CHARS:,}")
    if text.count("=") > MAX_LABELS:
        for line in text.split("\n"):
            if line.count("=") > MAX_LABELS and (n := line.count('="')) > MAX_LABELS:
                raise TooComplex(f"a series with {n:,} labels, over the cap of {MAX_LABELS}")


_LONG_LINE = re.compile(f"(?m)^[^\n]{{{MAX_LINE_CHARS + 1}}}")


class _Lines:
    """The page's lines for the parser, its CPU budget and its wall cap checked as they are
    read (the parse runs in one thread: ``time.thread_time`` is its own CPU)."""

    def __init__(self, text: str, cpu_s: float | None) -> None:
        self._lines: Iterator[str] = iter(io.StringIO(text))
        self._cpu_s = cpu_s
        self._cpu0 = time.thread_time()
        self._wall0 = time.monotonic()
        self._n = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        self._n += 1
        if self._cpu_s is not None and self._n % _LINES_PER_CHECK == 0:
            cpu = time.thread_time() - self._cpu0
            if cpu > self._cpu_s:
                raise TooComplex(
                    f"parsing took too long: {cpu:.1f} s of CPU (stopped at line {self._n:,})"
                )
            wall = time.monotonic() - self._wall0
            if wall > STARVED_S:
                raise ParseStarved(
                    f"parsing got {cpu:.2f} s of CPU in {wall:.0f} s (stopped at line "
                    f"{self._n:,}): this host gives infmon's scrape thread no core"
                )
        return next(self._lines)


def _has_long_line(text: str) -> bool:
    return len(text) > MAX_LABEL_CHARS and _LABEL_LINE.search(text) is not None


_LABEL_LINE = re.compile(f"(?m)^[^\n]{{{MAX_LABEL_CHARS + 1}}}")


def clean_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Label names and values with control characters escaped and lengths bounded."""
    return {clean(k, MAX_LABEL_CHARS): clean(v, MAX_LABEL_CHARS) for k, v in labels.items()}


def _clean_sample(s: Sample) -> Sample:
    return Sample(clean(s.name, MAX_LABEL_CHARS), clean_labels(s.labels), s.value)
