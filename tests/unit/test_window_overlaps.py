"""A load window shared by overlap (issue 32, "one step model"): the step ledger's tokens per
step and its level's tokens per bin (what a comparison resamples) come from one routing of the
window, by the same parts of it (``StepSpan.overlaps``), so a window across a pause counts only
its measured parts in both."""

from __future__ import annotations

import math

import pytest

from infmon.model.steps.ledger import StepLedger
from infmon.model.steps.span import CLOSED, Level, Segment, StepEvent, StepSpan


def _span() -> StepSpan:
    """Measured [10, 20) (warm-up from 8), paused, then measured [30, open)."""
    return StepSpan(
        1,
        Level(CLOSED, 8.0),
        "bench",
        (Segment(8.0, 10.0, 20.0), Segment(28.0, 30.0, None)),
    )


def test_a_window_across_a_pause_is_split_into_its_measured_parts() -> None:
    span = _span()
    assert list(span.overlaps(18.0, 32.0)) == [(0, 10.0, 18.0, 20.0), (1, 30.0, 30.0, 32.0)]
    assert list(span.overlaps(20.0, 30.0)) == []  # the pause: nothing measured
    assert list(span.overlaps(5.0, 9.0)) == []  # the warm-up
    assert list(span.overlaps(40.0, 41.0)) == [(1, 30.0, 40.0, 41.0)]  # the open end


def test_a_level_bins_the_tokens_the_ledger_shares() -> None:
    """The 140 tokens of a 14 s window across the pause: 4 s of it measured, 40 tokens, to the
    step's figure and to its level's bins at each part's middle, from one ``add_window``."""
    ledger = StepLedger()
    ledger.apply(
        [
            StepEvent("begin", 1, 8.0, CLOSED, 8.0, "bench", warmup_s=2.0),
            StepEvent("pause", 1, 20.0),
            StepEvent("resume", 1, 28.0, warmup_s=2.0),
        ]
    )
    span = ledger.book.get(1)
    assert span is not None and span.windows() == _span().windows()
    level = ledger.keep_levels().of(span)
    ledger.add_window(18.0, 32.0, 140.0, 0.0)
    [result] = ledger.results(32.0)
    s = result.stats  # 40 tokens over the 12 s measured by t=32
    assert s.duration_s == 12.0 and s.output_throughput_tok_s * 12.0 == pytest.approx(40.0)
    assert sum(c[0] for c in level.bins.values()) == pytest.approx(40.0)
    assert sum(c[1] for c in level.bins.values()) == pytest.approx(4.0)
    assert len(level.bins) == 2 and all(not math.isnan(c[0]) for c in level.bins.values())
