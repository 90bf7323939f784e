"""The one door to the step statistics and the knee rule (``infmon.model.records.stats`` /
``infmon.model.steps.knee``).

Reports never compute TTFT/TPOT/percentiles themselves: they call ``summarize_columns``, the
columnar form of the load engine's ``summarize`` (vLLM's definitions, DESIGN.md section 2; the
same figures, held together by a test), so a report's ``steps`` array equals the bench's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from infmon.model.records.columns import RecordColumns
from infmon.model.records.figures import summarize_columns
from infmon.model.records.measures import SLO, number
from infmon.model.records.request import RequestRecord
from infmon.model.steps.knee import Knee, KneePoint, find_knee, slo_max_concurrency
from infmon.model.steps.slo_verdict import SloVerdict, slo_verdict
from infmon.report.doc import JournalLine, KneeInfo, ReportDoc, StepEntry


def step_entry(
    records: RecordColumns | Sequence[RequestRecord],
    duration_s: float,
    slo: SLO | None,
    recorded: JournalLine | None = None,
) -> StepEntry:
    """One ``steps[]`` entry of ``infmon bench --json`` for these records.

    ``recorded`` is the step's stats as written at the time (when the step finished): the
    load level and the client's own measurements (achieved concurrency, loop lag) come from
    it, since they cannot be recomputed from records.
    """
    rec = recorded or {}
    lag_ms = rec.get("loop_lag_p99_ms")
    cols = records if isinstance(records, RecordColumns) else RecordColumns.from_records(records)
    stats = summarize_columns(
        cols,
        duration_s,
        slo,
        concurrency=rec.get("concurrency"),
        rate=rec.get("rate"),
        achieved_concurrency=rec.get("achieved_concurrency"),
        loop_lag_p99_s=lag_ms / 1e3 if isinstance(lag_ms, (int, float)) else math.nan,
    )
    entry: StepEntry = {**stats.to_dict()}
    return entry


def parse_slo(value: object) -> SLO | None:
    """The SLO from the session config (``{"ttft_s": …}`` or ``ttft=500ms,…``), or None."""
    if not value:
        return None
    if isinstance(value, dict):
        keys = ("ttft_s", "tpot_s", "e2el_s")
        slo = SLO(**{k: value.get(k) for k in keys})
    else:
        from infmon.config_values import parse_slo as parse

        slo = parse(str(value))
    return None if slo.empty else slo


def knee_point(step: StepEntry) -> KneePoint | None:
    """What the knee rule reads of a ``steps[]`` entry (None: not a closed-loop step it may
    judge): the entry's own figures, as ``StepResult.knee_point`` gives them live."""
    c = step.get("concurrency")
    ev = step.get("server_evidence") or {}
    if c is not None and step.get("queued") is True and ev:
        return KneePoint.of_queue(
            float(c),
            number(ev.get("running_p50")),
            number(ev.get("waiting_p50")),
            number(ev.get("kv_usage_max")),
        )
    if c is None or step.get("eligible") is False:
        return None
    return KneePoint(
        float(c),
        number(step.get("output_throughput_tok_s")),
        number((step.get("e2el_ms") or {}).get("p50")),
        number(step.get("slo_attainment")),
        number(ev.get("running_p50")),
        number(ev.get("waiting_p50")),
        number(ev.get("kv_usage_max")),
        number(ev.get("preemptions")),
        number(ev.get("api_server_cpu_cores")),
    )


def knee_points(steps: Sequence[StepEntry]) -> list[KneePoint | None]:
    """``knee_point`` of each closed-loop entry (a report's ``steps[]``)."""
    return [knee_point(s) for s in steps if str(s.get("level", "c=")).startswith("c=")]


def knee_and_slo_limit(steps: list[StepEntry]) -> tuple[KneeInfo | None, int | None]:
    """``(knee, slo_max_concurrency)`` across the steps, by the bench's own rule."""
    knee = find_knee(knee_points(steps))
    return (knee_info(knee) if knee else None), slo_max_concurrency([knee_point(s) for s in steps])


def slo_verdict_of(doc: ReportDoc) -> SloVerdict:
    """The SLO verdict of a report: "c=32", "≥ 64, not reached", "none met", "no SLO set"."""
    steps = [s for s in doc.get("steps") or [] if str(s.get("level", "c=")).startswith("c=")]
    return slo_verdict(steps, parse_slo((doc.get("config") or {}).get("slo")) is not None)


def knee_info(knee: Knee) -> KneeInfo:
    """The knee as the document holds it (``Knee.to_dict``: KneeInfo's keys and types)."""
    return cast(KneeInfo, knee.to_dict())
