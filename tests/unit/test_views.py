"""The step views the panes show (issue 17: findings 3, 5, 9, 10): the baseline compared at its
own level only, the knee table's counted steps and growth, step labels on the time series,
one line per cause, the header fitted by priority, latency units."""

from __future__ import annotations

import math

import pytest

from infmon.clock import FakeClock
from infmon.model.live.diagnose import CauseBook, Diagnosis, steps_label
from infmon.model.live.series import step_marks
from infmon.model.live.step_views import baseline_view, knee_points
from infmon.ui import format as f
from infmon.ui.panes.header import Part, fit
from tests.ui.fakes import populated_session


def test_the_baseline_is_compared_with_a_later_step_at_its_own_level_only() -> None:
    clock = FakeClock(0.0)
    session = populated_session(clock, steps=(4, 8, 4))
    first, other, again = session.ledger.results(clock.now())
    assert again.span.revisit_of == first.index
    at_other = baseline_view(first, other, clock.now())
    assert at_other is not None and not at_other.same_level and math.isnan(at_other.delta_fraction)
    at_same = baseline_view(first, again, clock.now())
    assert at_same is not None and at_same.same_level and at_same.level_label == "c=4"
    want = again.stats.output_throughput_tok_s / first.stats.output_throughput_tok_s - 1
    assert at_same.delta_fraction == pytest.approx(want)
    assert baseline_view(first, first, clock.now()).same_level is False  # not against itself


def test_the_knee_table_counts_one_step_per_level_with_its_growth_per_doubling() -> None:
    clock = FakeClock(0.0)
    session = populated_session(clock, steps=(4, 8, 4))
    points = knee_points(session.ledger.results(clock.now()), clock.now())
    assert [(p.level, p.counted) for p in points] == [(4, True), (8, True), (4, False)]
    assert math.isnan(points[0].growth_per_doubling)
    gain = points[1].output_tokens_per_s / points[0].output_tokens_per_s - 1  # one doubling
    assert points[1].growth_per_doubling == pytest.approx(gain, rel=1e-6)


def test_step_marks_fall_on_the_series_samples() -> None:
    starts = [(-5.0, "c=1"), (10.2, "c=2"), (20.0, "c=4"), (99.0, "c=8")]
    assert step_marks(starts, 1.0, 1.0, 30) == ((10, "c=2"), (19, "c=4"))


def test_a_cause_is_one_line_with_the_steps_it_applied_to() -> None:
    book = CauseBook()
    q = Diagnosis("queueing", "queueing: 245 waiting")
    assert book.update((q,), 9, 1.0) == ["queueing"]
    assert book.update((Diagnosis("queueing", "queueing: 250 waiting"),), 10, 2.0) == []
    book.update((q,), 11, 3.0)
    (cause,) = book.causes
    assert cause.steps == (9, 10, 11) and cause.active and cause.since_s == 1.0
    assert steps_label(cause.steps) == "steps 9–11"
    book.update((), 12, 4.0)
    assert not book.causes[0].active
    assert steps_label((2, 5, 7, 8, 9)) == "steps 2, 5, 7–9" and steps_label((4,)) == "step 4"


def test_the_header_leaves_out_the_least_needed_first() -> None:
    parts = [
        Part("closed loop c=16 (16 in flight)", "", 0),
        Part("running 00:01:40", "", 0),
        Part("0 failed", "", 2),
        Part("baseline step 4 (c=8)", "", 3),
        Part("vllm-v1 0.32.0", "", 4, 12),
        Part("Qwen/Qwen2.5-7B-Instruct", "", 5, 16),
        Part("http://very-long-hostname.example:8000/v1", "", 6, 16),
    ]
    kept = [p.text for p in fit(parts, 110)]
    assert "baseline step 4 (c=8)" in kept and "vllm-v1 0.32.0" in kept
    assert sum(map(len, kept)) + 3 * (len(kept) - 1) <= 110
    narrow = [p.text for p in fit(parts, 60)]
    assert narrow[:2] == ["closed loop c=16 (16 in flight)", "running 00:01:40"]


def test_latencies_keep_their_unit_and_sub_millisecond_figures() -> None:
    assert f.ms(0.00042) == "0.42 ms" and f.ms(0.0185) == "18.5 ms" and f.ms(2.44) == "2.44 s"
    assert f.latency_unit((0.075, 0.104, 0.179)) == ("ms", 1000.0)
    assert f.latency_unit((0.9, 1.2, 2.0)) == ("s", 1.0)
    assert f.in_unit(0.00042, 1000.0) == "0.42" and f.in_unit(12.04, 1.0) == "12.0"
    assert f.signed_pct(-0.043) == "−4.3%" and f.signed_pct(1.01) == "+101%"


def test_a_replaced_step_is_said_once() -> None:
    """`infmon demo` began step 1 paused, then the sweep replaced it: not "step 1: c=1 ×2"."""
    from infmon.model.steps.span import CLOSED, Level
    from tests.ui.fakes import new_session

    clock = FakeClock(0.0)
    s = new_session(clock)
    book = s.ledger.book
    s.apply_steps(book.begin(Level(CLOSED, 1), 0.0, "operator", 0.0), 0.0)
    s.apply_steps(book.pause(0.0), 0.0)
    s.apply_steps(book.begin(Level(CLOSED, 2), 0.5, "sweep", 0.0), 0.5)
    texts = [(e.text, e.count) for e in s.snapshot(1.0).events if e.text.startswith("step")]
    assert texts == [("step 1: c=2", 1)]


def test_why_the_sweep_stopped_stays_on_the_hint_line_until_the_operator_moves() -> None:
    from infmon.model.steps.span import CLOSED, Level
    from tests.ui.fakes import new_session

    clock = FakeClock(0.0)
    s = new_session(clock)
    book = s.ledger.book
    s.set_paused(False, 0.0)
    s.apply_steps(book.begin(Level(CLOSED, 256), 0.0, "hold", 0.0), 0.0)
    verdict = "sweep stopped: knee at c=256 (running capped at 256 while 245 wait); holding c=256"
    s.add_event(1.0, "sweep", verdict)
    assert s.snapshot(1.5).header.hint is None  # state is never read from the event's prose
    s.set_verdict(verdict)
    assert s.snapshot(2.0).header.hint == verdict
    s.apply_steps(book.begin(Level(CLOSED, 128), 3.0, "operator", 0.0), 3.0)
    assert s.snapshot(4.0).header.hint is None
