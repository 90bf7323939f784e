"""The API server's CPU: ``process_cpu_seconds_total`` on vLLM's page is the CPU time of the
process that answered it, vLLM's API server (HTTP, tokenising, detokenising, every token of
every stream, in one Python process apart from the engine core). Over a window it is that
process's cores; past a knee, near one core it may be what flattened throughput.

The pages are the real vLLM 0.32 capture of ``tests/fixtures/metrics`` (``process_cpu_seconds_total
13.14``) and the same page 2 s later with that counter moved on (every other sample alike)."""

from __future__ import annotations

import math

import pytest

from infmon.model.live.server_view import server_view_from
from infmon.model.live.session_replay import snapshot_of
from infmon.model.steps.evidence import ServerEvidence, ServerSample, evidence_of
from infmon.model.steps.knee import API_CPU_BUSY, KneePoint, find_knee
from infmon.sources.canonical import snapshot_from, snapshot_of_page
from infmon.sources.exposition import parse_exposition
from infmon.sources.readings import read_page
from tests.conftest import REPO

PAGE = (REPO / "tests/fixtures/metrics/vllm-v1-0.32-cpu-perreq.prom").read_text()
CPU_LINE = "process_cpu_seconds_total 13.14"


def later(cpu_s: float) -> str:
    assert PAGE.count(CPU_LINE) == 1
    return PAGE.replace(CPU_LINE, f"process_cpu_seconds_total {cpu_s}")


def window(first: str, second: str, window_s: float = 2.0):
    a, b = read_page(parse_exposition(first)), read_page(parse_exposition(second))
    return snapshot_from(b, a, timestamp_s=3.0, window_s=window_s)


def test_one_page_has_the_total_and_no_rate_and_no_engine_of_its_own() -> None:
    snap = snapshot_of_page(parse_exposition(PAGE), timestamp_s=1.0)
    assert snap.api_server_cpu_s_total == pytest.approx(13.14)
    assert snap.api_server_cpu_cores is None  # a rate needs two pages
    # an unlabelled counter is not an engine: the page's engines are its labelled groups
    assert len(snap.engines) == 1 and snap.engines[0].labels


def test_two_pages_give_the_processs_cores_over_the_window() -> None:
    snap = window(PAGE, later(13.98))
    assert snap.api_server_cpu_cores == pytest.approx(0.42)
    assert snap.api_server_cpu_s_total == pytest.approx(13.98)
    view = server_view_from(snap)
    assert view.api_cpu_cores == pytest.approx(0.42)


def test_a_restarted_process_or_a_page_without_it_has_no_rate() -> None:
    assert window(PAGE, later(0.5)).api_server_cpu_cores is None  # went down: a new process
    bare = PAGE.replace(CPU_LINE + "\n", "")
    assert window(bare, bare).api_server_cpu_cores is None
    assert window(bare, bare).api_server_cpu_s_total is None
    labelled = PAGE.replace(CPU_LINE, 'process_cpu_seconds_total{pod="a"} 13.14')
    assert snapshot_of_page(parse_exposition(labelled)).api_server_cpu_s_total is None


def test_the_journal_keeps_it_and_a_step_reads_its_cores() -> None:
    """Through ``to_dict`` (what the journal stores) and back, then as a step's evidence: the
    counter's increase over the step's first to last scrape."""
    snaps = [window(PAGE, later(13.14 + 0.4 * k)) for k in range(1, 6)]
    stored = [snapshot_of(float(k), s.to_dict()) for k, s in enumerate(snaps)]
    assert [s.api_server_cpu_s_total for s in stored] == pytest.approx(
        [13.54, 13.94, 14.34, 14.74, 15.14]
    )
    samples = [ServerSample.from_dict(float(k), s.to_dict()) for k, s in enumerate(snaps)]
    ev = evidence_of(s for s in samples if s is not None)
    assert ev is not None and ev.api_server_cpu_cores == pytest.approx(0.4)
    back = ServerEvidence.from_dict(ev.to_dict())
    assert back is not None and back.api_server_cpu_cores == pytest.approx(0.4)
    # a journal from before it: unknown, never 0
    old = {k: v for k, v in snaps[0].to_dict().items() if not k.startswith("api_server_cpu")}
    assert snapshot_of(0.0, old).api_server_cpu_cores is None
    sample = ServerSample.from_dict(0.0, old)
    assert sample is not None and math.isnan(sample.api_server_cpu_s)


def _sweep(api_cpu: tuple[float, ...]) -> list[KneePoint]:
    """Throughput flat from c=16 while latency rises: the knee at 16."""
    tok_s = (100.0, 190.0, 360.0, 640.0, 980.0, 1000.0, 1010.0)
    e2el = (500.0, 520.0, 560.0, 640.0, 800.0, 1500.0, 3000.0)
    return [
        KneePoint(float(2**i), t, e, 1.0, api_cpu=cpu)
        for i, (t, e, cpu) in enumerate(zip(tok_s, e2el, api_cpu, strict=True))
    ]


def test_past_the_knee_a_busy_api_server_is_said_and_an_idle_one_is_not() -> None:
    busy = find_knee(_sweep((0.1, 0.2, 0.35, 0.6, 0.9, 0.97, 0.98)))
    assert busy is not None and busy.concurrency == 16
    assert "the API server's process used 0.97 cores at c=32" in busy.reason
    assert "--api-server-count" in busy.reason
    for quiet in ((0.1, 0.1, 0.2, 0.3, 0.5, 0.6, 0.6), (math.nan,) * 7):
        knee = find_knee(_sweep(quiet))
        assert knee is not None and knee.concurrency == 16 and "API server" not in knee.reason
    # busy only below the knee: not past it, not said
    early = find_knee(_sweep((0.9, 0.9, 0.9, 0.9, 0.9, 0.5, 0.5)))
    assert early is not None and "API server" not in early.reason
    # from API_CPU_BUSY on, not below it
    at = find_knee(_sweep((0.1, 0.2, 0.3, 0.5, 0.7, API_CPU_BUSY, 0.6)))
    under = find_knee(_sweep((0.1, 0.2, 0.3, 0.5, 0.7, API_CPU_BUSY - 0.01, 0.6)))
    assert at is not None and "API server" in at.reason
    assert under is not None and "API server" not in under.reason
