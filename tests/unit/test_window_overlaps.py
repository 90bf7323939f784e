"""A load window shared by overlap (issue 32, "one step model"): the step ledger's tokens per
step and a comparison level's tokens per bin come from the same parts of the window
(``StepSpan.overlaps``), so a window across a pause counts only its measured parts in both."""

from __future__ import annotations

import math

import pytest

from infmon.model.compare.run_levels import LevelBuilder
from infmon.model.steps.book import CLOSED, Level, Segment, StepSpan


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
    """The 140 tokens of a 14 s window across the pause: 4 s of it measured, 40 tokens, in the
    bins at each part's middle."""
    level = LevelBuilder(_span())
    level.add_window(18.0, 32.0, 140.0)
    assert sum(c[0] for c in level.bins.values()) == pytest.approx(40.0)
    assert sum(c[1] for c in level.bins.values()) == pytest.approx(4.0)
    assert len(level.bins) == 2 and all(not math.isnan(c[0]) for c in level.bins.values())
