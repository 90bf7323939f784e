"""Axis labels: three significant digits, round ticks (pure helpers of ``infmon.ui.format``)."""

from __future__ import annotations

import math

from infmon.ui.format import nice_ticks, sig


def test_sig_keeps_three_significant_digits():
    assert [sig(x) for x in (2.5861, 941.0, 53.94, 0.0404, 0.0)] == [
        "2.59",
        "941",
        "53.9",
        "0.0404",
        "0",
    ]
    assert [sig(x) for x in (5376.4, 12345.0, 2.5e6, 999.7)] == ["5.38k", "12.3k", "2.5M", "1000"]
    assert sig(math.nan) == "—" and sig(None) == "—"


def test_nice_ticks_are_round_and_span_the_data():
    assert nice_ticks(54.9, 2907.3, 3) == (0.0, 1000.0, 2000.0, 3000.0)
    assert nice_ticks(2.38, 3.46, 4) == (2.0, 2.5, 3.0, 3.5)
    assert nice_ticks(0.0, 99.0, 5) == (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)
    one = nice_ticks(5.0, 5.0, 2)
    assert one[0] < 5.0 < one[-1]
    assert nice_ticks(math.nan, 1.0) == ()
