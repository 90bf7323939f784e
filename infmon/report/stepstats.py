"""The one door to the step statistics and the knee rule (``infmon.model.stats`` / ``knee``).

Reports never compute TTFT/TPOT/percentiles themselves: they call the load engine's
``summarize`` (vLLM's definitions, DESIGN.md section 2), exactly as ``infmon bench`` does,
so a report's ``steps`` array equals the bench's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from infmon.model.records import RequestRecord


def step_entry(records: Sequence[RequestRecord], duration_s: float, slo: Any) -> dict[str, Any]:
    """One ``steps[]`` entry of ``infmon bench --json`` for these records."""
    from infmon.model.stats import summarize

    return summarize(records, duration_s, slo).to_dict()


def parse_slo(value: Any) -> Any:
    """The SLO as ``summarize`` wants it, from the session config (string or dict) or None."""
    if value in (None, "", {}):
        return None
    from infmon.model import stats

    parse = getattr(stats, "parse_slo", None)
    if isinstance(value, str) and parse is not None:
        return parse(value)
    slo_cls = getattr(stats, "Slo", None)
    if isinstance(value, dict) and slo_cls is not None:
        return slo_cls(**value)
    return value


def knee_and_slo_limit(steps: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, Any]:
    """``(knee, slo_max_concurrency)`` across the steps, by the bench's own rule."""
    from infmon.model.knee import find_knee, slo_max_concurrency

    knee = find_knee(steps)
    if knee is not None and hasattr(knee, "to_dict"):
        knee = knee.to_dict()
    return knee, slo_max_concurrency(steps)
