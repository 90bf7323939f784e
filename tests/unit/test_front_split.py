"""The front of a client's TTFT split at the server's own TTFT histogram.

The anatomy's front (client TTFT − the engine's queued → first token) is the request's way in
and the first token's way out. vLLM's ``vllm:time_to_first_token_seconds`` is timed in its API
server, from the prompt's rendering to the first token into its output loop, so less the
engine's figure it is the API server's part, and the rest is outside the server (HTTP, SSE, the
network, the client). Eight of nine real benches of vLLM on this host had the self-check blame
"the client or the network" for a front that grew from c=1 to 16; the histogram shows most of
that growth inside the API server, and the steps where the client starved outside it.

The sessions are real (``tests/fixtures/sessions/*.source.txt``): the real vLLM 0.32 CPU build
with ``--enable-per-request-metrics``, scraped by infmon during each step."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from infmon.journal.reader import SessionReader
from infmon.model.steps.evidence import ServerSample, evidence_of
from infmon.report import build_summary
from tests.recorded import unpack_journal


def _report(name: str, tmp: Path) -> dict:
    return build_summary(unpack_journal(name, tmp / name))  # type: ignore[return-value]


def test_a_steps_ttft_histogram_is_read_over_the_windows_inside_it(tmp_path: Path) -> None:
    """The real scrapes of one step: its evidence's mean is the count-weighted mean of the
    windows that opened after its first scrape; a window reaching back past that (a fleet's
    Prometheus range, the warm-up, the level before) or across a restart is left out."""
    session = unpack_journal("jittered-vllm", tmp_path / "s")
    with SessionReader(session) as reader:
        samples = [
            s
            for line in reader.iter_scrapes()
            if (s := ServerSample.from_dict(line["t"], line["snap"])) is not None
        ]
    usable = [s for s in samples if s.ttft_count > 0 and s.window_s > 0]
    assert len(usable) > 20  # the histogram is on vLLM's page, each scrape a window of it
    run = usable[5:9]
    inside = [s for s in run[1:] if s.t - s.window_s >= run[0].t - 0.05]
    want = sum(s.ttft_count * s.ttft_mean_s for s in inside) / sum(s.ttft_count for s in inside)
    ev = evidence_of(run)
    assert ev is not None and ev.server_ttft_s == pytest.approx(want)
    assert 0.003 < ev.server_ttft_s < 0.1  # ms, as the client's TTFT on this host (4-30 ms)
    first, second = run[0], run[1]
    reaching_back = ServerSample(second.t, ttft_count=50, ttft_mean_s=1.0, window_s=300.0)
    restarted = ServerSample(second.t, restarted=True, ttft_count=50, ttft_mean_s=1.0,
                             window_s=second.t - first.t)  # fmt: skip
    for bad in (reaching_back, restarted):
        alone = evidence_of([first, bad])
        assert alone is not None and math.isnan(alone.server_ttft_s)


def test_the_self_check_names_the_api_server_of_a_real_sweep(tmp_path: Path) -> None:
    """A steady real sweep of c = 1-16: the front grew in the API server (the histogram grew
    with it), so the self-check names the API server, not the client, with the figures; every
    step shows its split in the JSON and in the Markdown anatomy table."""
    doc = _report("jittered-vllm", tmp_path)
    per = doc["per_request"]
    assert "mostly inside the server's API process" in per["self_check"]
    assert "not the client or the network" in per["self_check"]
    evidence = {st["step"]: st["server_evidence"]["server_ttft_s"] for st in doc["steps"]}
    by_c: dict[str, list[float]] = {}
    for st in per["steps"]:
        assert evidence[st["step"]] is not None
        by_c.setdefault(st["label"], []).append(st["front_api_server_ms"])
    # the API server's part grows with the load in every round (ms, means)
    for low, high in zip(by_c["c=1"], by_c["c=16"], strict=True):
        assert 1.0 < low < 5.0 and high > 2 * low


def test_a_starved_client_shows_outside_the_server(tmp_path: Path) -> None:
    """The session where the host starved the client for 8 of 15 steps: on those the front's
    mean outside the server is the client's own wait (tens of ms) while the API server's part
    stays a few ms; on the round it ran at real time, outside stays a few ms too."""
    doc = _report("starved-client-vllm", tmp_path)
    late = {st["step"] for st in doc["steps"] if st["client_late"]}
    steps = {st["step"]: st for st in doc["per_request"]["steps"]}
    worst = max(late, key=lambda i: steps[i]["front_outside_ms"])
    assert steps[worst]["front_outside_ms"] > 20.0 > 5.0 > steps[worst]["front_api_server_ms"]
    clean = [steps[i] for i in steps if i not in late and i >= 11]  # round 3, at real time
    assert clean and all(st["front_outside_ms"] < 10.0 for st in clean)


def test_the_live_anatomy_splits_the_front_once_a_steps_evidence_is_in(tmp_path: Path) -> None:
    """The monitor's anatomy, fed the same real records: before any step's evidence has
    settled it says what the client-side share alone can say; given each step's histogram
    mean (what the session passes from its settled steps) it names the API server."""
    from infmon.model.live.anatomy_live import AnatomyBook

    session = unpack_journal("jittered-vllm", tmp_path / "s")
    doc = build_summary(session)
    ttft = {st["step"]: st["server_evidence"]["server_ttft_s"] for st in doc["steps"]}
    book = AnatomyBook()
    with SessionReader(session) as reader:
        for rec in reader.iter_records():
            if rec.step in (1, 5):  # c=1 and c=16 of the first round
                book.add(rec)
    before = book.view()
    assert before.growth is not None and before.growth.startswith("client or network limits")
    after = book.view({1: ttft[1], 5: ttft[5]})
    assert after.growth is not None and after.growth.startswith("API server limits: its part")
    assert book.view({1: ttft[1], 5: ttft[5]}) is after  # unchanged: not rebuilt
