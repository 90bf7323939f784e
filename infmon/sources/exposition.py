"""Parse the Prometheus text exposition format (and OpenMetrics) into plain samples.

Uses ``prometheus_client``'s own parsers (the library vLLM and SGLang expose with), which
take ~6 ms for a 53 kB vLLM page (``bench/scrape.py``). ``*_created`` series are dropped;
OpenMetrics exemplars are ignored. Anything unparseable raises ``ExpositionError`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families


class ExpositionError(ValueError):
    """The text is not Prometheus exposition format (the one error parsing can raise)."""


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

    def get(self, name: str) -> tuple[Sample, ...]:
        return self.by_name.get(name, ())

    def has(self, name: str) -> bool:
        return name in self.by_name

    @property
    def names(self) -> Iterable[str]:
        return self.by_name.keys()

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_name.values())


def page_from_samples(samples: Iterable[Sample]) -> Page:
    """Index samples by name, dropping ``_created`` series (a start timestamp, not a value)."""
    index: dict[str, list[Sample]] = {}
    for s in samples:
        if s.name.endswith("_created"):
            continue
        index.setdefault(s.name, []).append(s)
    return Page({k: tuple(v) for k, v in index.items()})


def parse_exposition(text: str | bytes) -> Page:
    """Parse a ``/metrics`` page; raise ``ExpositionError`` if it is not exposition text."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"not UTF-8 text: {exc}") from None
    if "\x00" in text:
        raise ExpositionError("NUL byte in exposition text")
    is_openmetrics = text.rstrip().endswith("# EOF")
    parser = openmetrics_families if is_openmetrics else text_families
    try:
        samples = [
            Sample(s.name, s.labels, float(s.value)) for fam in parser(text) for s in fam.samples
        ]
    except Exception as exc:  # the parsers raise ValueError, KeyError, IndexError…
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ExpositionError(f"not Prometheus exposition text: {first}") from None
    return page_from_samples(samples)
