"""The report's per-request section: anatomy per step, acceptance by task and prompt length."""

from __future__ import annotations

from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord
from infmon.model.records.server_timing import ServerTiming, SpecFigures
from infmon.report.markdown import _table
from infmon.report.perreq import PerRequestPart, PerRequestReport, diagnosis_lines, markdown_lines
from tests.unit.test_report_doc import type_errors

RATES = {"edit-code": 0.8, "summarise": 0.1, "conversation": 0.5}


def _rec(i: int, task: str, conc: int, prompt: int) -> RequestRecord:
    sent = 10.0 + i
    drafted = 30
    accepted = round(RATES[task] * drafted)
    spec = SpecFigures(10, drafted, accepted, 3)
    chunks = tuple(sent + 0.05 + k * 0.01 for k in range(10))
    return RequestRecord(
        request_id=i,
        sent_s=sent,
        chunk_times_s=chunks,
        end_s=chunks[-1],
        prompt_tokens=prompt,
        output_tokens=10,
        concurrency=conc,
        server=ServerTiming(1.0, 40.0, 90.0, 10.0, spec=spec),
        task=task,
    )


def _section() -> PerRequestPart:
    report = PerRequestReport()
    for step, conc in ((1, 1), (2, 8)):
        recs = [_rec(step * 100 + i, t, conc, 100 + 400 * (i % 2)) for i, t in enumerate(RATES)]
        recs += [_rec(step * 100 + 10 + i, t, conc, 700) for i, t in enumerate(RATES)]
        recs += [_rec(step * 100 + 20 + i, t, conc, 3000) for i, t in enumerate(RATES)]
        report.add(step, RecordColumns.from_records(recs))
    return report.section()


def test_the_section_names_each_task_and_the_drafters_fit() -> None:
    part = _section()
    assert type_errors(part, PerRequestPart) == []
    s = part["per_request"]
    rates = {g["name"]: round(g["rate"], 2) for g in s["acceptance_by_task"]}
    assert rates == {"edit-code": 0.8, "summarise": 0.1, "conversation": 0.5}
    assert (s["best_task"], s["worst_task"]) == ("edit-code", "summarise")
    assert s["drafter_fit"] == (
        "acceptance 0.80 on edit-code, 0.10 on summarise: the drafter fits edit-code"
    )
    assert [g["name"] for g in s["acceptance_by_prompt_length"]] == [
        "0–127 tokens",
        "128–511 tokens",
        "512–2047 tokens",
        "≥ 2048 tokens",
    ]
    assert [st["label"] for st in s["steps"]] == ["c=1", "c=8"]
    assert s["steps"][0]["parts"]["queue"]["p50_ms"] == 1.0
    assert s["drafter_fit"] in diagnosis_lines(part)
    md = "\n".join(markdown_lines(part, _table))
    assert "| edit-code | 6 | 0.80 |" in md and "Drafter fit" in md


def test_no_server_figures_no_section() -> None:
    report = PerRequestReport()
    rec = RequestRecord(1, 1.0, (1.1, 1.2), 1.2, (), 5, 2)
    report.add(1, RecordColumns.from_records([rec]))
    assert report.section() == {}


def test_each_step_says_why_requests_waited_and_where_prompt_tokens_came_from() -> None:
    from infmon.report.doc import ReportDoc
    from infmon.report.server_detail import DetailTimeline, ServerDetailPart, attach

    tl = DetailTimeline(origin_s=100.0)

    def scrape(t: float, waiting: float, hit: float, compute: float, load_s: float) -> None:
        snap = {
            "waiting": waiting,
            "waiting_by_reason": {"capacity": waiting, "deferred": 0.0},
            "prompt_tokens_by_source_total": {"local_compute": compute, "local_cache_hit": hit},
            "kv_offload": {"load_time_s_total": load_s, "load_bytes_total": load_s * 6e9},
        }
        tl.add({"t": 100.0 + t, "snap": snap})

    tl.add({"t": 100.5, "snap": {"waiting": 3.0}})  # an older page: no families, skipped
    for t in range(11):
        scrape(t, 0.0, 100.0 * t, 300.0 * t, 0.0)
    for t in range(11, 21):
        scrape(t, 240.0, 1100.0 + 620.0 * (t - 10), 3300.0 + 380.0 * (t - 10), 0.2 * (t - 11))
    steps: list = [
        {"step": 1, "concurrency": 1, "start_s": 0.0, "end_s": 10.0},
        {"step": 2, "concurrency": 64, "start_s": 11.0, "end_s": 20.0},
    ]
    lines, part = attach(steps, tl)
    assert type_errors(part, ServerDetailPart) == []
    rows = part["server_detail"]
    assert rows[0]["prompt_from_cache"] == 0.25 and rows[1]["prompt_from_cache"] == 0.62
    assert rows[0]["kv_offload_load_fraction"] == 0.0
    assert rows[1]["kv_offload_load_fraction"] == 0.2
    assert lines == [
        "c=64: queueing: 240 waiting for capacity, 0 deferred (median)",
        "c=64: KV offload: 1.2 GB/s loaded back, 20% of the time spent loading",
    ]
    doc: ReportDoc = part  # type: ignore[assignment]
    from infmon.report.server_detail import markdown_lines as detail_md

    assert "| c=64 | 240 / 0 | 62% | — | 20% | — |" in "\n".join(detail_md(doc, _table))
