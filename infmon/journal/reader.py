"""Stream a session directory back: constant memory, tolerant of a torn last line.

A process killed mid-write leaves at most one partial line at the end of a file; it is
skipped (and counted), as is any line that does not parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infmon.journal.codec import decode_record
from infmon.journal.writer import CONFIG, EVENTS, QUALITY, RECORDS, SCRAPES
from infmon.model.records import RequestRecord


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


def is_session_dir(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / RECORDS).exists()


@dataclass
class SessionReader:
    """Read access to one session directory; every ``iter_*`` re-reads from disk."""

    session_dir: Path
    skipped: list[int] = field(default_factory=lambda: [0])
    """Lines that could not be parsed (a torn last line after a kill, typically)."""

    def __post_init__(self) -> None:
        self.session_dir = Path(self.session_dir)

    @property
    def meta(self) -> dict[str, Any]:
        path = self.session_dir / CONFIG
        if not path.exists():
            return {}
        try:
            return json.loads(path.read_text())
        except ValueError:
            return {}

    @property
    def config(self) -> dict[str, Any]:
        meta = self.meta
        return meta.get("config", {}) if "schema" in meta else meta

    def origin_s(self) -> float:
        """The session's perf_counter origin: recorded, else the first request's send time."""
        origin = (self.meta.get("clock_origin") or {}).get("perf_s")
        if isinstance(origin, (int, float)):
            return float(origin)
        first = next(self.iter_records(), None)
        self.skipped[0] = 0
        return first.sent_s if first is not None else 0.0

    @property
    def quality(self) -> dict[str, Any] | None:
        path = self.session_dir / QUALITY
        try:
            return json.loads(path.read_text()) if path.exists() else None
        except ValueError:
            return None

    def iter_record_dicts(self) -> Iterator[dict[str, Any]]:
        """Encoded records (see ``codec``): the fast path for large sessions."""
        return iter_jsonl(self.session_dir / RECORDS, self.skipped)

    def iter_records(self) -> Iterator[RequestRecord]:
        for d in self.iter_record_dicts():
            try:
                yield decode_record(d)
            except (KeyError, TypeError, ValueError):
                self.skipped[0] += 1

    def iter_scrapes(self) -> Iterator[dict[str, Any]]:
        """``{"t": perf_s, "snap": {...}}`` in the order they were taken."""
        return iter_jsonl(self.session_dir / SCRAPES, self.skipped)

    def iter_events(self) -> Iterator[dict[str, Any]]:
        """``{"t", "wall", "kind", ...payload}`` in the order they happened."""
        return iter_jsonl(self.session_dir / EVENTS, self.skipped)
