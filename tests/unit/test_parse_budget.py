"""The parse's budget is its thread's CPU time, not the wall clock (round 3).

On this 2-core machine a real vLLM at c=1 fills both cores; infmon's scrape thread then waits
for one, and parsing a valid 654-line vLLM page (10 ms of CPU) took over 5 s of wall time. The
wall-clock deadline called that ``too_complex`` and the bench said "server metrics unusable for
9.6 s". A page is too complex when it costs CPU; a parse that gets no CPU is the host's doing,
and past ``STARVED_S`` it says so.

The host's starvation is reproduced as wall time that passes while the parsing thread does not
run: each line read sleeps (the thread is off CPU), as it is when the server's processes hold
the cores.
"""

from __future__ import annotations

import io
import time

import pytest

from infmon.sources import exposition
from infmon.sources.errors import SourceError
from infmon.sources.exposition import ParseStarved, TooComplex, parse_exposition
from infmon.sources.scraper import ScrapeLimits, parse_page
from tests.conftest import FIXTURES

PAGE = (FIXTURES / "metrics" / "vllm-v1-0.32-cpu-perreq-spec.prom").read_bytes()


class _OffCpu(io.StringIO):
    """Lines that arrive as to a thread the host keeps waiting: ``pause_s`` of wall time each,
    no CPU."""

    pause_s = 0.002

    def __next__(self) -> str:
        time.sleep(self.pause_s)
        return super().__next__()


def test_a_valid_page_on_a_starved_host_parses(monkeypatch) -> None:
    monkeypatch.setattr(exposition.io, "StringIO", _OffCpu)
    started = time.monotonic()
    page = parse_page(PAGE, ScrapeLimits(timeout_s=0.5))
    took = time.monotonic() - started
    assert took > 2 * 0.5  # the wall time is well past the budget…
    assert page.get("vllm:num_requests_running")  # …and the page parsed: its CPU was a fraction


def test_a_parse_with_no_core_for_a_minute_says_it_is_the_host(monkeypatch) -> None:
    monkeypatch.setattr(exposition.io, "StringIO", _OffCpu)
    monkeypatch.setattr(exposition, "STARVED_S", 0.2)
    with pytest.raises(ParseStarved, match=r"s of CPU in \d+ s .*gives infmon's scrape thread no"):
        parse_exposition(PAGE, cpu_s=5.0)
    with pytest.raises(SourceError) as caught:
        parse_page(PAGE, ScrapeLimits(timeout_s=5.0))
    assert caught.value.kind == SourceError.TIMEOUT and "no core" in caught.value.message


def test_a_page_that_costs_cpu_is_still_too_complex() -> None:
    """Wide labels: the parser is quadratic in a series' labels (62 s for 256k before)."""
    labels = ",".join(f'l{i}="v"' for i in range(120))
    page = "\n".join(f'm{{{labels},k="{n}"}} 1' for n in range(3_000)) + "\n"
    with pytest.raises(TooComplex, match=r"parsing took too long: [\d.]+ s of CPU"):
        parse_exposition(page, cpu_s=0.05)
