"""The monitor's ``w`` with ``--search slo`` (and ``goodput``, ``knee``): the live controller
runs the same search policy bench runs, each probe a live step that settles before the next
move, and ends holding the level it found (journalled, search.json in the session, the
frontier in the snapshot).

Everything but the load engine is real (the controller, the Session and its ledger, the
journal on disk); the server is the fluid closed-loop model in virtual time whose TPOT grows
with the batch, so its SLO frontier is known: TPOT = 18 ms + 0.5 ms × c meets 30.25 ms up to
c=24.
"""

from __future__ import annotations

import json
from pathlib import Path

from infmon.clock import FakeClock
from infmon.commands.live import LiveController
from infmon.commands.wiring import RunWiring, wire_session
from infmon.engine.types import RecordBatch
from infmon.journal import JournalWriter
from infmon.model.live.dial import DialState, LoadDial
from infmon.model.live.session import Session, SessionConfig
from infmon.model.records.measures import SLO
from infmon.model.search.level_fit import probe_of
from infmon.model.search.live_search import LiveSearch
from infmon.model.search.policy import Next, SearchSpec, Verdict, next_move
from infmon.model.search.search_json import parse_search_doc
from infmon.model.steps.span import CLOSED
from tests.enginekit.fluid import FluidServer
from tests.ui.fakes import RecordingEngine

SLO_ = SLO(tpot_s=0.03025)
SPEC = SearchSpec(goal="slo", lo=4, hi=128, resolution=0.05, budget=12)


def run_search(
    session_dir: Path,
    step_s: float = 8.0,
    spec: SearchSpec = SPEC,
    server: FluidServer | None = None,
):
    clock = FakeClock(1000.0)
    journal = JournalWriter(session_dir, clock, autoflush=False)
    journal.write_config({"url": "http://fluid", "slo": {"tpot_s": SLO_.tpot_s}, "label": "s"})
    session = Session(
        SessionConfig(endpoint="http://fluid", slo=SLO_, step_warmup_s=0.8), start_s=clock.now()
    )
    wiring = wire_session(RunWiring(journal, session.ledger, session.health), session, clock)
    dial = LoadDial(DialState(CLOSED, 1, 1.0, paused=True), step_s=step_s)
    ctl = LiveController(
        RecordingEngine(), session, wiring, journal, dial, clock, warmup_s=0.8,  # type: ignore[arg-type]
        search=lambda: LiveSearch(spec, SLO_, step_s),
    )  # fmt: skip
    server = server or FluidServer(per_seq_tpot_s=0.0005)
    book = session.ledger.book

    def second() -> None:
        t0 = clock.now()
        cur = book.current
        warm = cur.segments[-1].measure_from_s if cur else t0
        step_at = lambda t: next((s.index for s in book.latest_started_by(t)), 1)  # noqa: E731
        recs, window, snap = server.second(t0, dial.state.concurrency, step_at, warm)
        clock.advance(1.0)
        wiring.records(RecordBatch(0, recs))
        wiring.window(window)
        wiring.snapshot(snap)
        ctl.tick()

    ctl.start()
    ctl.press("sweep")
    seen = []
    for _ in range(600):  # virtual seconds; the search ends long before
        if ctl.search is None:
            break
        seen.append(ctl.search.progress())
        second()
    for _ in range(5):  # held at the frontier a little
        second()
    journal.close()
    return ctl, session, dial, seen


def _events(session_dir: Path, kind: str) -> list[dict]:
    from infmon.journal.reader import SessionReader

    return [e for e in SessionReader(session_dir).iter_events() if e.get("kind") == kind]


def test_w_with_search_finds_the_frontier_the_policy_finds_and_holds_it(tmp_path: Path) -> None:
    session_dir = tmp_path / "s"
    ctl, session, dial, seen = run_search(session_dir)
    assert ctl.search is None, seen[-1]  # the search ended on its own
    doc = parse_search_doc(json.loads((session_dir / "search.json").read_text()))
    print(doc["line"])
    assert doc["status"] == "found" and doc["found"] is not None and doc["bound"] is not None
    assert doc["found"]["level"] == 24 and doc["bound"]["level"] == 25, doc["line"]
    assert dial.state.concurrency == 24 and not dial.state.paused  # holds the frontier
    assert session.snapshot(1e9).header.hint == doc["line"]  # the story's end stays in view
    # every probe was read settled, none of its requests left out, and the pure policy fed
    # the same settled steps moves exactly as the live search did, to the same verdict
    results = {r.index: r for r in session.ledger.results(1e9)}
    probes = []
    for p in doc["probes"]:
        r = results[p["step"]]
        assert r.settled and p["requests"] == r.stats.completed + r.stats.failed
        move = next_move(SPEC, probes)
        assert isinstance(move, Next) and move.level == p["level"]
        probes.append(probe_of(r, SLO_, SPEC.attainment))
    final = next_move(SPEC, probes)
    assert isinstance(final, Verdict) and final.found is not None and final.found.level == 24
    moves = _events(session_dir, "search_move")
    assert [m["level"] for m in moves] == [p["level"] for p in doc["probes"]]
    assert len(probes) <= SPEC.budget
    verdicts = _events(session_dir, "search_verdict")
    assert len(verdicts) == 1 and verdicts[0]["line"] == doc["line"]
    assert seen[0] == "search 1/12 · c=4 · measuring"
    assert any(s.endswith("settling") for s in seen)


def test_any_other_key_stops_the_search_and_says_so(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    journal = JournalWriter(tmp_path / "s", clock, autoflush=False)
    session = Session(
        SessionConfig(endpoint="http://x", slo=SLO_, step_warmup_s=0.8), start_s=clock.now()
    )
    wiring = RunWiring(journal, session.ledger, session.health)
    dial = LoadDial(DialState(CLOSED, 1, 1.0, paused=True), step_s=8.0)
    ctl = LiveController(
        RecordingEngine(), session, wiring, journal, dial, clock, warmup_s=0.8,  # type: ignore[arg-type]
        search=lambda: LiveSearch(SPEC, SLO_, 8.0),
    )  # fmt: skip
    ctl.start()
    ctl.press("sweep")
    assert ctl.search is not None and dial.state.concurrency == 4 and not dial.state.paused
    ctl.press("up")
    assert ctl.search is None and dial.state.concurrency == 5
    texts = lambda: [e.text for e in session.events.items()]  # noqa: E731
    assert "search stopped: the operator took the dial" in texts()
    ctl.press("sweep")
    ctl.press("sweep")  # w again: stopped by the operator
    assert ctl.search is None and texts()[-1] == "search stopped by the operator"
    journal.close()


def _held_after(session_dir: Path, spec: SearchSpec, server: FluidServer | None = None):
    ctl, session, dial, seen = run_search(session_dir, spec=spec, server=server)
    assert ctl.search is None, seen[-1]
    doc = parse_search_doc(json.loads((session_dir / "search.json").read_text()))
    results = {r.index: r for r in session.ledger.results(1e9)}
    for p in doc["probes"]:  # each probe read settled, with all its requests
        r = results[p["step"]]
        assert r.settled and p["requests"] == r.stats.completed + r.stats.failed
    frontier = session.snapshot(1e9).knee.frontier
    assert frontier is not None and frontier.goal == spec.goal and frontier.verdict == doc["line"]
    assert [p.label for p in frontier.points] == [f"c={p['level']:g}" for p in doc["probes"]]
    return doc, dial


def test_w_with_search_goodput_finds_the_peak_of_goodput_and_holds_it(tmp_path: Path) -> None:
    """Goodput (requests/s within the SLO) grows with c up to c=24, where every request meets
    TPOT ≤ 30.25 ms; from c=25 none does: the peak is c=24."""
    spec = SearchSpec(goal="goodput", lo=4, hi=128, resolution=0.05, budget=12)
    doc, dial = _held_after(tmp_path / "s", spec)
    assert doc["goal"] == "goodput" and doc["status"] == "found", doc["line"]
    assert doc["found"] is not None and doc["found"]["level"] == 24, doc["line"]
    assert doc["line"].startswith("goodput: c=24 (peak goodput ")
    goodput = {p["level"]: p["goodput_req_s"] for p in doc["probes"]}
    assert goodput[24] == max(goodput.values())
    assert dial.state.concurrency == 24 and not dial.state.paused


def test_w_with_search_knee_brackets_the_knee_and_holds_it(tmp_path: Path) -> None:
    """A server capped at 32 running sequences: throughput stops growing past c=32 while
    requests wait, so the knee is c=32, bracketed by the next level measured (c=64)."""
    spec = SearchSpec(goal="knee", lo=4, hi=256, resolution=0.05, budget=12)
    server = FluidServer(max_num_seqs=32, per_seq_tpot_s=0.0005)
    doc, dial = _held_after(tmp_path / "s", spec, server)
    assert doc["goal"] == "knee" and doc["status"] == "found", doc["line"]
    assert doc["found"] is not None and doc["found"]["level"] == 32, doc["line"]
    assert doc["bound"] is not None and doc["bound"]["level"] == 64
    assert "max_num_seqs ≈ 32" in doc["line"]
    assert dial.state.concurrency == 32 and not dial.state.paused
