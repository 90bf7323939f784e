"""The paragraph the monitor prints when it quits (issue 17, finding 6)."""

from __future__ import annotations

import math

from infmon.model.live.step_views import Closing, closing_text
from infmon.model.steps.knee import Knee


def _closing(**kw) -> Closing:
    base = dict(
        elapsed_s=125.4,
        steps=11,
        peak_output_tokens_per_s=5479.2,
        peak_level="c=512",
        knee=Knee(256, "running capped at 256 while 245 wait", True, "server"),
        slo_limit=128,
        succeeded=5000,
        failed=0,
        cancelled=256,
        slo_set=True,
    )
    return Closing(**{**base, **kw})


def test_the_summary_names_peak_knee_slo_and_counts() -> None:
    assert closing_text(_closing()) == (
        "infmon: 2 min 5 s, 11 steps, 5,256 requests (0 failed, 256 cancelled). Peak 5,479 "
        "tok/s at c=512; knee c=256 (running capped at 256 while 245 wait); SLO limit c=128."
    )


def test_the_summary_says_what_it_could_not_judge() -> None:
    text = closing_text(_closing(knee=None, slo_set=False))
    assert "no knee yet (throughput still growing); no SLO set." in text
    confirming = Knee(64, "", False, "throughput")
    assert "knee c=64 (confirming); SLO limit none met" in closing_text(
        _closing(knee=confirming, slo_limit=None)
    )
    short = closing_text(_closing(steps=1, peak_output_tokens_per_s=math.nan, peak_level=None))
    assert short.startswith("infmon: 2 min 5 s, 1 step, ") and "held long enough" in short
