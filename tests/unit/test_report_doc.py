"""The report document against its types (``infmon.report.doc``): every key a TypedDict names
is in the document ``build_summary`` writes for a recorded session, no key is left untyped, and
each value has its declared type; report.json parses back into the same document, and a file
that is not one is refused with its reason."""

from __future__ import annotations

import collections.abc
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from infmon.journal import JournalWriter
from infmon.journal.events import TargetResolved
from infmon.load.feed import WorkloadInfo as Workload
from infmon.model.base.jsontypes import JSON
from infmon.report import build_summary, write_reports
from infmon.report.doc import (
    SCHEMA,
    EventMark,
    GpuPart,
    QualityInfo,
    ReportDoc,
    ServerConfig,
    SessionInfo,
    StepEfficiencyInfo,
    StepEntry,
    StepGpuInfo,
    TargetInfo,
    WorkloadInfo,
)
from infmon.report.docjson import ReportFormatError, parse_report
from infmon.report.gpu import attach
from infmon.report.markdown import md_escape
from tests.synthetic import SyntheticServer, write_synthetic_session
from tests.unit.test_gpu_steps import gpus_of_page, scrape, sim_page, timeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONDITIONAL = {
    ReportDoc: {"gpu", "imported_from", "per_request", "server_detail"},
    SessionInfo: {"journal", "reports_dir"},
    TargetInfo: {"endpoints", "load_thread"},
    StepEntry: {"concurrency", "rate", "transition", "queued", "gpu", "efficiency"},
    QualityInfo: {"baseline", "compared", "length_ratio", "first_divergence", "baseline_accuracy"},
}
"""Keys written only in some sessions (GPU data, several endpoints, a rate step…)."""
PARTIAL = {EventMark, ServerConfig}
"""Types whose keys vary by nature (an event's by its kind, the server's by what it published):
checked for their types only, and an event may hold more fields than EventMark names."""


def _is_typeddict(tp: object) -> bool:
    return isinstance(tp, type) and typing.is_typeddict(tp)


def type_errors(value: object, tp: Any, where: str = "doc", complete: bool = True) -> list[str]:
    """Where ``value`` breaks ``tp`` (a TypedDict, list/dict/union of them or a scalar type);
    with ``complete``, a TypedDict's keys not in ``CONDITIONAL`` must all be present."""
    if tp is Any or tp is object:
        return []
    if isinstance(tp, typing.ForwardRef) and tp.__forward_arg__ == "JSON":
        tp = JSON  # the JSON value type's own recursion (infmon.model.base.jsontypes)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        found = [type_errors(value, a, where, complete) for a in args]
        return [] if any(not f for f in found) else min(found, key=len)
    if origin in (list, collections.abc.Sequence):
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [
            e
            for i, v in enumerate(value)
            for e in type_errors(v, args[0], f"{where}[{i}]", complete)
        ]
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [
            e for k, v in value.items() for e in type_errors(v, args[1], f"{where}.{k}", complete)
        ]
    if _is_typeddict(tp):
        return _typeddict_errors(value, tp, where, complete)
    if tp is type(None):
        return [] if value is None else [f"{where}: {value!r} is not None"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp) and (tp is bool or not isinstance(value, bool))
    return [] if ok else [f"{where}: {value!r} is not {tp.__name__}"]


def _typeddict_errors(value: object, tp: Any, where: str, complete: bool) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not a {tp.__name__}"]
    hints = typing.get_type_hints(tp)
    errors = [f"{where}.{k}: not in {tp.__name__}" for k in value if k not in hints]
    if tp is EventMark:
        errors = []
    if complete and tp not in PARTIAL and (value or tp is not WorkloadInfo):
        expected = set(hints) - CONDITIONAL.get(tp, set())
    else:
        expected = tp.__required_keys__
    errors += [f"{where}.{k}: missing ({tp.__name__})" for k in sorted(expected - set(value))]
    for k, v in value.items():
        if k in hints:
            errors += type_errors(v, hints[k], f"{where}.{k}", complete)
    return errors


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("doc") / "session"
    write_synthetic_session(
        path,
        concurrencies=(1, 4, 16),
        step_duration_s=4.0,
        server=SyntheticServer(spec_acceptance=0.5),
        loop_lag_ms_per_stream=1.0,
    )
    workload = Workload(
        "random", 7, "exact (tokenizer)", True, "128", "32", False, 0, 1, 1, None, None, 1.7e9
    )
    quality = {
        "schema": "infmon.quality/1",
        "url": "http://127.0.0.1:8000",
        "model": "synthetic/model",
        "endpoint": "completions",
        "temperature": 0,
        "probes": 2,
        "correct": 1,
        "errors": 0,
        "accuracy": 0.5,
        "agreement": None,
        "results": [{"id": "p0", "output": "4", "correct": True}],
    }
    with JournalWriter(path, autoflush=False) as j:  # what bench and `infmon quality` add
        j.write_event("workload", t=100.0, **workload.to_dict())
        j.write_quality(quality)
    return path


def test_the_written_document_has_every_typed_key_with_its_type(session):
    doc = build_summary(session)
    assert len(doc["steps"]) == 3 and doc["timeline"] and doc["server_timeline"]
    assert doc["workload"]["seed"] == 7 and doc["quality"] and doc["memory_budget"]
    assert type_errors(doc, ReportDoc) == []
    assert set(doc) == ReportDoc.__required_keys__
    optional = {"rate", "transition", "queued", "gpu", "efficiency"}
    assert set(doc["steps"][0]) == set(typing.get_type_hints(StepEntry)) - optional


def test_report_json_is_the_document_and_parses_back_into_it(session, tmp_path):
    write_reports(session, tmp_path)
    raw = json.loads((tmp_path / "report.json").read_text())
    assert type_errors(raw, ReportDoc) == []
    assert parse_report(raw, "report.json") == raw


def test_the_gpu_parts_have_their_types():
    steps: list[Any] = [{"step": 1, "concurrency": 8, "start_s": 0.0, "end_s": 10.0}]
    shared = gpus_of_page(sim_page("contention", 64))
    steps[0]["output_throughput_tok_s"] = 900.0
    _, section = attach(steps, timeline(*(scrape(t, shared) for t in (1, 2))))
    assert type_errors(steps[0]["gpu"], list[StepGpuInfo]) == []
    assert type_errors(steps[0]["efficiency"], StepEfficiencyInfo) == []
    assert steps[0]["efficiency"]["tok_s_per_w"] > 0
    assert type_errors(section, GpuPart) == []
    assert section["gpu"]["gpus"] and section["gpu"]["timeline"]


def test_the_checker_finds_a_missing_key_and_a_wrong_type(session):
    doc: Any = build_summary(session)
    del doc["caveats"]
    doc["steps"][1]["completed"] = "many"
    doc["session"]["extra"] = 1
    assert type_errors(doc, ReportDoc) == [
        "doc.caveats: missing (ReportDoc)",
        "doc.session.extra: not in SessionInfo",
        "doc.steps[1].completed: 'many' is not int",
    ]


def test_an_older_report_of_the_schema_parses_with_its_top_level_completed():
    """Its parts have the types, not every key added since (readers of loaded runs use .get)."""
    raw = json.loads((FIXTURES / "sessions" / "jsonl-v1.report.json").read_text())
    assert "workload" not in raw
    doc = parse_report(raw, "jsonl-v1.report.json")
    assert set(doc) == ReportDoc.__required_keys__ and doc["workload"] == {}
    assert doc["steps"] == raw["steps"]
    errors = type_errors(doc, ReportDoc, complete=False)
    assert errors and all(e.endswith("missing (ServerPoint)") for e in errors)  # no prefix counters


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ([], "not a JSON object"),
        ({"schema": "infmon.quality/1", "steps": []}, "schema 'infmon.quality/1' is not"),
        ({"steps": []}, "schema None is not"),
        ({"schema": SCHEMA, "steps": {"a": 1}}, "`steps` is not a list of objects"),
        ({"schema": SCHEMA, "steps": [1]}, "`steps` is not a list of objects"),
        ({"schema": SCHEMA, "steps": [], "session": []}, "`session` is not a JSON dict"),
        ({"schema": SCHEMA, "steps": [], "knee": 16}, "`knee` is neither an object nor null"),
    ],
)
def test_a_file_that_is_not_a_report_is_refused_with_its_reason(raw, reason):
    with pytest.raises(ReportFormatError, match=f"^x.json: {reason}"):
        parse_report(raw, "x.json")


def test_the_load_threads_scheduling_is_in_every_report(tmp_path):
    """bench and the monitor journal how the load thread ran (issue 25: the header *and* the
    report say whether real-time priority was taken, and why not); every format carries it."""
    path = tmp_path / "session"
    write_synthetic_session(path, concurrencies=(1,), step_duration_s=2.0)
    said = "normal priority: real-time not permitted (root, CAP_SYS_NICE or `ulimit -r 1` …)"
    with JournalWriter(path, autoflush=False) as j:
        j.write(TargetResolved("http://x", "m", "completions", {}, (), said))
    doc = build_summary(path)
    assert doc["target"]["load_thread"] == said
    write_reports(path, tmp_path / "out")
    assert f"Load thread: {md_escape(said)}" in (tmp_path / "out" / "report.md").read_text()
    assert "Load thread: normal priority" in (tmp_path / "out" / "report.html").read_text()
    assert json.loads((tmp_path / "out" / "report.json").read_text())["target"]["load_thread"]
