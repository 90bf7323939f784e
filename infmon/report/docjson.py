"""The report document to and from JSON: the one place it is written (``report.json``) and
the one place a parsed file becomes a document again (``parse_report``, for ``compare``, the
live baseline and ``bench --baseline``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from infmon.journal.jsonio import null_nonfinite, write_json_atomic
from infmon.model.base.jsontypes import JSON
from infmon.report.doc import BENCH_SCHEMA, SCHEMA, ReportDoc, StepEntry


class ReportFormatError(ValueError):
    """A JSON file that is not a report document (or a bench result of the same shape)."""


def json_ready(doc: ReportDoc) -> ReportDoc:
    """The document with every non-finite float as None (JSON has no NaN): the same keys, and
    the types already say ``float | None`` wherever a figure can be missing."""
    cleaned: ReportDoc = null_nonfinite(doc)
    return cleaned


def write_report_json(path: Path, doc: ReportDoc) -> None:
    """``report.json``: the one place a report document becomes JSON on disk (atomically;
    a NaN left in it is written as null)."""
    write_json_atomic(path, doc)


_OBJECTS = ("session", "target", "workload", "config", "server")
_LISTS = ("timeline", "server_timeline", "events", "diagnosis", "caveats")


def parse_report(raw: object, source: str) -> ReportDoc:
    """A parsed report.json (or ``infmon bench --json`` result) as the document, checked: the
    schema, ``steps`` a list of objects, each top-level part an object or a list as the types
    say. Top-level keys an older report lacks get the value a reader takes for "not recorded"
    ({}, [] or None); inside the parts, values are the file's (see ``infmon.report.doc``).
    Raises ``ReportFormatError`` naming ``source`` and what is wrong."""
    if not isinstance(raw, dict):
        raise ReportFormatError(f"{source}: not a JSON object")
    schema = raw.get("schema")
    if schema not in (SCHEMA, BENCH_SCHEMA):
        raise ReportFormatError(f"{source}: schema {schema!r} is not {SCHEMA} or {BENCH_SCHEMA}")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ReportFormatError(f"{source}: `steps` is not a list of objects")
    for key, kind in [*((k, dict) for k in _OBJECTS), *((k, list) for k in _LISTS)]:
        if raw.get(key) is not None and not isinstance(raw[key], kind):
            raise ReportFormatError(f"{source}: `{key}` is not a JSON {kind.__name__}")
    for key in ("knee", "memory_budget", "quality"):
        if raw.get(key) is not None and not isinstance(raw[key], dict):
            raise ReportFormatError(f"{source}: `{key}` is neither an object nor null")
    return _document(raw, steps, is_report=schema == SCHEMA)


def _obj(raw: Mapping[str, JSON], key: str) -> JSON:
    """``raw[key]`` (parsed JSON, an object when present), or {} when absent or null."""
    return raw.get(key) or {}


def _document(raw: Mapping[str, JSON], steps: list[StepEntry], is_report: bool) -> ReportDoc:
    """The checked JSON as the document. ``raw`` is parsed JSON: its values are whatever the
    file held, their containers checked by ``parse_report``; that check is all the cast at the
    end stands on (the readers of a loaded run ``.get`` each value and check its type)."""
    gpu = {"gpu": raw["gpu"]} if isinstance(raw.get("gpu"), dict) else {}
    doc: dict[str, object] = {
        "schema": raw["schema"],
        "session": _obj(raw, "session"),
        "target": _obj(raw, "target"),
        "workload": _obj(raw, "workload"),
        "config": _obj(raw, "config"),
        "server": _obj(raw, "server") if is_report else {},  # a bench result's is its health
        "memory_budget": raw.get("memory_budget"),
        "steps": steps,
        "knee": raw.get("knee"),
        "slo_max_concurrency": raw.get("slo_max_concurrency"),
        "timeline": raw.get("timeline") or [],
        "server_timeline": raw.get("server_timeline") or [],
        "events": raw.get("events") or [],
        "quality": raw.get("quality"),
        "diagnosis": raw.get("diagnosis") or [],
        **gpu,
        "caveats": raw.get("caveats") or [],
    }
    return cast(ReportDoc, doc)
