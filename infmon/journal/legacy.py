"""Sessions recorded before the SQLite journal: JSON lines (``infmon.session/1``), read only.

Files: ``config.json`` (schema, clock origin, redacted config), ``records.jsonl`` (one compact
record per line, ``infmon.journal.codec``), ``scrapes.jsonl`` (``{"t", "snap"}``),
``events.jsonl`` (``{"t", "wall", "kind", …}``) and ``quality.json``. A process killed mid-write
leaves at most one partial line at the end of a file; it is skipped (and counted), as is any
line that does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from infmon.journal.codec import decode_record
from infmon.model.records.request import RequestRecord

RECORDS, SCRAPES, EVENTS = "records.jsonl", "scrapes.jsonl", "events.jsonl"
CONFIG, QUALITY = "config.json", "quality.json"


def iter_jsonl(path: Path, skipped: list[int] | None = None) -> Iterator[dict[str, Any]]:
    """Yield each parseable JSON object of ``path``; count the rest in ``skipped[0]``."""
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                yield obj
            elif skipped is not None:
                skipped[0] += 1


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text()) if path.exists() else None
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def iter_records(session_dir: Path, skipped: list[int]) -> Iterator[RequestRecord]:
    for d in iter_jsonl(Path(session_dir) / RECORDS, skipped):
        try:
            yield decode_record(d)
        except (KeyError, TypeError, ValueError):
            skipped[0] += 1
