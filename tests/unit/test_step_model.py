"""The one step model: pauses, revisits, short steps, cancellations, window tokens, replay."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infmon.model.records.figures import summarize
from infmon.model.records.measures import SLO
from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.steps.book import StepBook
from infmon.model.steps.evidence import ServerSample
from infmon.model.steps.gathering import ClientCheck
from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import EVENT_KINDS, JOURNAL_KIND, Level, StepEvent
from infmon.model.steps.tally import StepTally

C = "closed"


def rec(rid, step, sent, n=10, gap=0.1, ttft=0.2, warmup=False, kind=None, out=None):
    times = tuple(sent + ttft + i * gap for i in range(n)) if kind != ErrorKind.CONNECT else ()
    return RequestRecord(
        request_id=rid,
        sent_s=sent,
        chunk_times_s=times,
        end_s=(times[-1] if times else sent) + 0.001,
        prompt_tokens=32,
        output_tokens=(n if out is None else out) if kind is None else None,
        step=step,
        warmup=warmup,
        error_kind=kind,
    )


def test_paused_time_is_not_measured_and_paused_chunks_are_not_counted() -> None:
    led = StepLedger()
    led.apply(led.book.begin(Level(C, 4), 0.0, "operator", warmup_s=1.0))
    led.apply(led.book.pause(5.0))
    led.apply(led.book.resume(15.0, warmup_s=1.0))
    led.apply(led.book.end(20.0))
    span = led.book.get(1)
    assert span is not None and span.measured_s(99) == pytest.approx(8.0)
    assert span.held_s(99) == pytest.approx(10.0)
    # one chunk a second from 0.5 to 19.5: 1.5–4.5 and 16.5–19.5 are measured (4 + 4 chunks)
    r = RequestRecord(1, 0.3, tuple(0.5 + i for i in range(20)), 19.6, output_tokens=20, step=1)
    led.add_record(r)
    led.settle()
    (res,) = led.settled_results()
    assert res.stats.output_throughput_tok_s == pytest.approx(8 / 8.0)
    assert res.stats.completed == 0  # sent in the warm-up: its latency is not this step's


def test_returning_to_a_level_is_a_revisit_and_quick_presses_coalesce() -> None:
    book = StepBook(coalesce_s=1.0)
    for t, c in [(0, 1), (10, 2), (20, 1), (30, 8), (30.4, 16)]:
        book.begin(Level(C, c), t, "operator", 0.0)
    steps = book.steps
    assert [s.level.value for s in steps] == [1, 2, 1, 16]  # c=8 held 0.4 s became c=16
    assert steps[2].revisit_of == 1 and steps[1].revisit_of is None
    assert steps[3].index == 4 and steps[3].start_s == 30.4


def test_a_level_set_while_paused_before_anything_ran_replaces_that_step() -> None:
    """`infmon URL` starts paused at c=1; the sweep (or + while paused) must not leave a junk
    step 1 and a "revisit of step 1" behind it."""
    book = StepBook(coalesce_s=1.0)
    book.begin(Level(C, 1), 0.0, "operator", 0.0)
    book.pause(0.0)
    book.begin(Level(C, 2), 5.0, "operator", 0.0)
    book.pause(5.0)
    book.begin(Level(C, 1), 9.0, "sweep", 0.0)
    ((step,),) = [book.steps]
    assert (step.index, step.level.value, step.revisit_of, step.start_s) == (1, 1, None, 9.0)
    book.pause(19.0)  # this one ran: a new level now makes a new step
    book.begin(Level(C, 2), 25.0, "operator", 0.0)
    assert [s.index for s in book.steps] == [1, 2]


def test_a_short_step_is_shown_but_not_eligible_for_the_knee() -> None:
    led = StepLedger(min_hold_s=5.0, min_requests=20)
    led.apply(led.book.begin(Level(C, 2), 0.0, "operator", 0.0))
    for i in range(30):
        led.add_record(rec(i, 1, 0.1 * i))
    led.apply(led.book.begin(Level(C, 4), 4.0, "operator", 0.0))  # held 4 s < 5 s
    led.apply(led.book.begin(Level(C, 8), 14.0, "operator", 0.0))
    for i in range(10):  # 10 s, but only 10 requests
        led.add_record(rec(100 + i, 2, 4.0 + i))
    led.apply(led.book.end(30.0))
    led.settle()
    a, b, c = led.settled_results()
    assert not a.eligible and a.stats.completed == 30  # 4 s
    assert not b.eligible and b.stats.completed == 10  # 10 requests
    assert not c.eligible and c.stats.completed == 0


def test_requests_cancelled_at_quit_are_cancelled_not_failed() -> None:
    led = StepLedger()
    led.apply(led.book.begin(Level(C, 4), 0.0, "operator", 0.0))
    led.add_record(rec(1, 1, 1.0))
    led.add_record(rec(2, 1, 2.0, kind=ErrorKind.CANCELLED))
    led.add_record(rec(3, 1, 2.0, kind=ErrorKind.CONNECT))
    led.apply(led.book.end(10.0))
    led.settle()
    (res,) = led.settled_results()
    assert (res.stats.completed, res.stats.failed, res.stats.cancelled) == (1, 1, 1)


def test_window_tokens_count_warmup_requests_and_stop_at_the_window() -> None:
    led = StepLedger()
    led.apply(led.book.begin(Level(C, 1), 0.0, "bench", warmup_s=2.0))
    # a warm-up request streaming 0.5 … 9.5 s (10 tokens) and a measured one 2.2 … 11.2 s
    led.add_record(rec(1, 1, 0.3, n=10, gap=1.0, warmup=True))  # ends at 9.5
    led.apply(led.book.end(10.0))  # window 2 … 10 s
    led.add_record(rec(2, 1, 2.0, n=10, gap=1.0))  # ends at 11.2: arrives after the end
    led.settle()
    (res,) = led.settled_results()
    # warm-up: chunks at 2.5 … 9.5 (8); measured: 2.2 … 9.2 (8)
    assert res.stats.output_throughput_tok_s == pytest.approx(16 / 8.0)
    assert res.stats.output_tokens == 10  # the measured requests' own tokens (vLLM's count)
    assert res.stats.warmup_excluded == 1


def test_server_evidence_comes_from_scrapes_inside_the_measured_time() -> None:
    led = StepLedger()
    led.apply(led.book.begin(Level(C, 512), 0.0, "sweep", warmup_s=1.0))
    led.add_sample(ServerSample(0.5, running=100, waiting=0))  # warm-up: not evidence
    for t in range(2, 9):
        led.add_sample(ServerSample(t, 256, 245, 0.7, 3.0, 1000.0 * t))
    led.apply(led.book.end(9.0))
    led.settle()
    ev = led.settled_results()[0].evidence
    assert ev is not None and ev.samples == 7 and ev.running_p50 == 256 and ev.waiting_p50 == 245
    assert ev.generation_tokens_per_s == pytest.approx(1000.0) and ev.preemptions == 0


def _journal(events: list[StepEvent]) -> list[tuple[str, dict]]:
    return [(JOURNAL_KIND[e.kind], e.payload()) for e in events]


def test_a_ledger_replayed_from_journal_events_gives_the_same_steps() -> None:
    live = StepLedger(SLO(ttft_s=0.5))
    written: list[StepEvent] = []

    def do(events: list[StepEvent]) -> None:
        live.apply(events)
        written.extend(events)

    # what happens, in time order: level changes, a pause, and each request when it ends
    timeline: list[tuple[float, object]] = []
    for k, c in enumerate([1, 2, 4, 8]):
        timeline.append((10.0 * k, ("begin", c)))
        for i in range(40):
            r = rec(1000 * k + i, k + 1, 10.0 * k + 0.2 * i, ttft=0.1 * (k + 1))
            timeline.append((r.end_s, r))
    timeline += [(38.0, ("pause",)), (40.0, ("resume",)), (45.0, ("end",))]
    records = []
    for t, what in sorted(timeline, key=lambda x: x[0]):
        if isinstance(what, RequestRecord):
            records.append(what)
            live.add_record(what)
        elif what[0] == "begin":
            do(live.book.begin(Level(C, what[1]), t, "sweep", 1.0))
            live.set_check(live.book.next_index - 1, ClientCheck(what[1] * 0.99, 0.001))
        elif what[0] == "pause":
            do(live.book.pause(t))
        elif what[0] == "resume":
            do(live.book.resume(t, 1.0))
        else:
            do(live.book.end(t))
    live.settle()
    assert len(live.settled_results()) == 4
    offline = StepLedger(SLO(ttft_s=0.5))
    for kind, payload in _journal(written):
        ev = StepEvent.from_payload(EVENT_KINDS[kind], payload)
        assert ev is not None
        offline.apply([ev])
    for k, c in enumerate([1, 2, 4, 8]):
        offline.set_check(k + 1, ClientCheck(c * 0.99, 0.001))
    for r in records:
        offline.add_record(r)
    offline.settle()
    assert [r.to_dict() for r in offline.settled_results()] == [
        r.to_dict() for r in live.settled_results()
    ]


records_strategy = st.lists(
    st.builds(
        rec,
        rid=st.integers(0, 10**6),
        step=st.just(1),
        sent=st.floats(0, 100),
        n=st.integers(1, 40),
        gap=st.floats(0.001, 0.5),
        ttft=st.floats(0.001, 3.0),
        warmup=st.booleans(),
        kind=st.sampled_from([None, None, None, ErrorKind.CANCELLED, ErrorKind.HTTP]),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(records_strategy, st.sampled_from([SLO(), SLO(ttft_s=0.5, tpot_s=0.1)]))
def test_the_live_tally_gives_the_bench_figures(records, slo) -> None:
    tally = StepTally(slo)
    for r in records:
        tally.figures()  # asked between records, as the live view does: never a stale answer
        tally.add(r)
    live = tally.figures()
    want = summarize(records, 10.0, slo).to_dict()
    from infmon.model.records.stats import assemble

    got = assemble(live, 10.0).to_dict()
    itl_want, itl_got = want.pop("itl_ms"), got.pop("itl_ms")
    for key in ("p50", "p90", "p99", "max"):
        if itl_want[key] is None:
            assert itl_got[key] is None
        else:
            assert math.isclose(itl_got[key], itl_want[key], rel_tol=0.011), key
    for key in ("mean", "p50", "p99", "max"):
        for name in ("ttft_ms", "tpot_ms", "e2el_ms"):
            a, b = got[name][key], want[name][key]
            assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9), (name, key)
    for name in ("ttft_ms", "tpot_ms", "e2el_ms"):
        got.pop(name), want.pop(name)
    assert got == want


def test_a_request_left_out_of_a_step_is_counted_at_once() -> None:
    tally = StepTally()
    tally.add(rec(1, 1, 0.0))
    assert tally.figures().warmup_excluded == 0 and tally.figures().completed == 1
    tally.exclude()
    tally.add(rec(2, 1, 0.1, warmup=True))
    assert tally.figures().warmup_excluded == 2 and tally.figures().completed == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0.001, 3.0),  # TTFT
            st.floats(0.001, 0.5),  # gap
            st.integers(1, 30),  # output tokens
            st.integers(1, 5000),  # prompt tokens counted
        ),
        min_size=30,
        max_size=120,
    ),
    st.integers(1, 29),
)
def test_a_long_live_step_folds_into_histograms_within_one_percent(rows, limit) -> None:
    """Past ``exact_limit`` measured requests a tally keeps histograms, not every value: the
    latencies stay within 1 % of the exact figures, the prompt lengths stay exact."""
    records = []
    for i, (ttft, gap, n, prompt) in enumerate(rows):
        r = rec(i, 1, float(i), n=n, gap=gap, ttft=ttft)
        records.append(replace(r, prompt_tokens=prompt, prompt_tokens_requested=prompt + i % 3))
    exact, folded = StepTally(), StepTally(exact_limit=limit)
    for r in records:
        exact.add(r)
        folded.add(r)
    assert folded._ttft.exact is None and folded._prompts.counted is None  # the arrays are freed
    want, got = exact.figures(), folded.figures()
    for name in ("ttft", "tpot", "e2el"):
        a, b = getattr(want, name), getattr(got, name)
        assert a.count == b.count, name
        for q in ("p50", "p90", "p99", "max", "mean"):
            x, y = getattr(b, q), getattr(a, q)
            assert (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=0.011), (name, q)
    pw, pg = want.prompt_lengths, got.prompt_lengths
    assert pw.count == pg.count
    for q in ("requested_mean", "counted_mean", "counted_p50", "counted_p99"):
        assert math.isclose(getattr(pg, q), getattr(pw, q), rel_tol=1e-9), q
    assert (want.completed, want.output_tokens) == (got.completed, got.output_tokens)
