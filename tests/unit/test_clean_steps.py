"""Steps that start clean (issue 26, finding 1 and must show 4).

After a level change a step measures only once the old level's streams have finished (a
decrease) or the new streams are all running (an increase), plus its warm-up; a step that
never gets there is a transition and never enters the knee. The ledger learns what is in
flight from the load's windows (``note_inflight``), as bench, the monitor and the sweep feed
it, and the journal keeps its verdict as a ``step_settle`` event, so a report replays it."""

from __future__ import annotations

import math

import pytest

from infmon.model.records.request import RequestRecord
from infmon.model.steps.book import StepBook, starts_clean
from infmon.model.steps.knee import find_knee, points_of
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.result import StepResult
from infmon.model.steps.span import CLOSED, EVENT_KINDS, RATE, Level, StepEvent

WINDOW_S = 0.25
WARMUP_S = 1.0
SINGLE_TPOT_S = 0.018
"""A lone stream's token gap (the simulator's 7B model: ~55 tok/s)."""
BUSY_TPOT_S = 0.060
"""A token gap at c=256 (a full batch)."""


def stream(rid: int, step: int, sent: float, tokens: int, tpot: float) -> RequestRecord:
    first = sent + 0.05
    times = tuple(first + i * tpot for i in range(tokens))
    return RequestRecord(
        rid, sent, times, times[-1] + 1e-4, prompt_tokens=128, output_tokens=tokens, step=step
    )


def single_stream(step: int, start: float, until: float, rid0: int) -> list[RequestRecord]:
    """c=1: one request after the other, 128 tokens each."""
    out, t = [], start
    while t < until:
        r = stream(rid0 + len(out), step, t, 128, SINGLE_TPOT_S)
        out.append(r)
        t = r.end_s
    return out


def run_c1(led: StepLedger, start: float, old: list[RequestRecord], inflight: bool) -> StepResult:
    """Step 2 at c=1 from ``start`` for 40 s, while ``old`` (step 1's streams) finish; the
    load's windows say what is in flight every 250 ms (``inflight``: the ledger is told)."""
    said = {1: len(old)} if inflight else None
    led.apply(led.book.begin(Level(CLOSED, 1), start, "operator", WARMUP_S, said))
    mine = single_stream(2, start, start + 40.0, 10_000)
    pending = sorted(old + mine, key=lambda r: r.end_s)
    t = start
    while t < start + 40.0:  # records as they finish, a window every 250 ms
        t += WINDOW_S
        while pending and pending[0].end_s <= t:
            led.add_record(pending.pop(0))
        if inflight:
            by_step = {1: sum(r.end_s > t for r in old)}
            by_step[2] = sum(r.sent_s <= t < r.end_s for r in mine)
            led.note_inflight(0, t, ((s, n) for s, n in by_step.items() if n))
    return end_at(led, start + 40.0, pending, 2)


def end_at(led: StepLedger, t: float, pending: list[RequestRecord], index: int) -> StepResult:
    """The step ends at ``t``; the requests still running finish after it."""
    led.apply(led.book.end(t))
    for r in pending:
        led.add_record(r)
    led.settle()
    return next(r for r in led.settled_results() if r.index == index)


def old_streams(change_s: float) -> list[RequestRecord]:
    """The 27 c=256 streams still running at the change: they end over the next ~10 s."""
    return [stream(i, 1, change_s - 4.0 + 0.1 * i, 200 + 7 * i, BUSY_TPOT_S) for i in range(27)]


def from_rest() -> StepResult:
    led = StepLedger()
    led.apply(led.book.begin(Level(CLOSED, 1), 0.0, "operator", WARMUP_S, {}))
    mine = single_stream(1, 0.0, 40.0, 0)
    for r in mine:
        if r.end_s <= 40.0:
            led.add_record(r)
    return end_at(led, 40.0, [r for r in mine if r.end_s > 40.0], 1)


def after_256(inflight: bool) -> StepResult:
    led = StepLedger()
    led.apply(led.book.begin(Level(CLOSED, 256), 0.0, "operator", WARMUP_S, {}))
    return run_c1(led, 100.0, old_streams(100.0), inflight)


def test_a_decrease_256_to_1_measures_only_c1s_requests() -> None:
    rest, clean = from_rest(), after_256(inflight=True)
    base = rest.stats.output_throughput_tok_s
    assert 50 < base < 60  # one stream of the 7B model
    got = clean.stats.output_throughput_tok_s
    print(f"c=1 from rest {base:.1f} tok/s; after 256 with 27 still running {got:.1f} tok/s")
    assert got == pytest.approx(base, rel=0.05)
    last_old = max(r.end_s for r in old_streams(100.0))
    assert clean.span.measure_from_s == pytest.approx(
        math.ceil((last_old - 100.0) / WINDOW_S) * WINDOW_S + 100.0 + WARMUP_S
    )
    assert not clean.transition and clean.stats.completed > 0


def test_without_the_clean_start_the_c1_step_counts_the_old_streams() -> None:
    """What the step measured before the fix (issue 26: c=1 at 473 tok/s after 256)."""
    dirty = after_256(inflight=False)
    assert dirty.stats.output_throughput_tok_s > 1.5 * from_rest().stats.output_throughput_tok_s


def test_a_step_that_never_settles_is_a_transition_and_not_in_the_knee() -> None:
    led = StepLedger()
    results = []
    for i, c in enumerate((64, 128, 256), start=1):
        led.apply(led.book.begin(Level(CLOSED, c), 30.0 * (i - 1), "sweep", WARMUP_S, {}))
        for k in range(40):
            led.add_record(stream(100 * i + k, i, 30.0 * (i - 1) + 2 + 0.5 * k, 64, 0.01 * i))
    led.apply(led.book.begin(Level(CLOSED, 32), 90.0, "operator", WARMUP_S, {3: 256}))
    led.note_inflight(0, 95.0, [(3, 40), (4, 32)])  # the c=256 streams still running
    led.apply(led.book.end(100.0))
    led.settle()
    results = led.settled_results()
    last = results[-1]
    assert last.transition and not last.eligible and last.span.measured_s(100.0) == 0.0
    assert last.to_dict()["transition"] is True
    assert "transition" not in results[0].to_dict()
    points = [r.knee_point for r in results]
    assert points[-1] is None and all(p.concurrency != 32 for p in points_of(points))
    assert find_knee(points) is None or find_knee(points).concurrency != 32


def test_the_rule_decrease_waits_increase_needs_its_streams_running() -> None:
    c = lambda v: Level(CLOSED, v)  # noqa: E731
    assert starts_clean(None, c(8), {}, 1)
    assert starts_clean(c(256), c(1), {}, 2)  # nothing of the old level in flight
    assert not starts_clean(c(256), c(1), {1: 27, 2: 1}, 2)
    assert not starts_clean(c(128), c(256), {1: 128}, 2)  # the new streams not sent yet
    assert starts_clean(c(128), c(256), {1: 128, 2: 128}, 2)
    assert starts_clean(c(128), c(256), {1: 100, 2: 155}, 2)  # one between two requests
    assert not starts_clean(c(1), c(2), {1: 27, 2: 2}, 3)  # 27 > 2: a decrease still draining
    assert not starts_clean(Level(RATE, 5.0), c(4), {1: 3}, 2)  # a change of mode
    assert starts_clean(Level(RATE, 5.0), Level(RATE, 10.0), {1: 3}, 2)


def test_the_settle_event_goes_through_the_journal_and_replays_to_the_same_span() -> None:
    led = StepLedger()
    led.apply(led.book.begin(Level(CLOSED, 256), 0.0, "operator", WARMUP_S, {}))
    events = led.book.begin(Level(CLOSED, 1), 50.0, "operator", WARMUP_S, {1: 27})
    assert events[-1].payload()["clean"] is False
    settle = led.note_inflight(0, 58.0, [(2, 1)])
    assert [e.kind for e in settle] == ["settle"]
    lines = [("step_begin", e.payload()) for e in events if e.kind == "begin"]
    lines += [("step_settle", e.payload()) for e in settle]
    replayed = StepBook()
    replayed.apply(StepEvent("begin", 1, 0.0, CLOSED, 256, "operator", WARMUP_S))
    for kind, payload in lines:
        ev = StepEvent.from_payload(EVENT_KINDS[kind], payload)
        assert ev is not None
        replayed.apply(ev)
    assert replayed.get(2) == led.book.get(2)
    assert replayed.get(2).measure_from_s == 58.0 + WARMUP_S
