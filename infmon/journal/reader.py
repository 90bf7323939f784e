"""Read a session directory back: SQLite shards (``journal*.sqlite``) or old JSON lines.

The format is detected per directory; a directory with both (an old session to which a newer
infmon appended) is read as both, the JSON lines first. Records come back as ``RecordColumns``
(``read_columns``, with step and send-time filters on the journal's indexes, or one step at a
time with ``iter_step_columns``) or as ``RequestRecord`` objects (``iter_records``, for small
sessions and tests). With several worker shards, records are merged by send time.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infmon.journal import legacy, sqlcols
from infmon.journal.legacy import iter_jsonl
from infmon.journal.rows import row_record
from infmon.journal.scrapes import ScrapeReplay
from infmon.journal.store import (
    LEGACY_RECORDS,
    MAIN_DB,
    record_columns,
    select_records,
    shard_paths,
)
from infmon.model.records.columns import RecordColumns
from infmon.model.records.request import RequestRecord

__all__ = ["JournalReadError", "SessionReader", "is_session_dir", "iter_jsonl"]


class JournalReadError(ValueError):
    """A journal file that SQLite cannot read (not a journal, or damaged): one line."""


def is_session_dir(path: Path) -> bool:
    p = Path(path)
    return p.is_dir() and ((p / MAIN_DB).exists() or (p / LEGACY_RECORDS).exists())


def _open(path: Path) -> sqlite3.Connection:
    """Read-only; ``immutable`` when the directory cannot hold WAL's shared-memory file."""
    for params in ("mode=ro", "mode=ro&immutable=1"):
        db = sqlite3.connect(f"file:{path}?{params}", uri=True, check_same_thread=False)
        db.isolation_level = None
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            db.close()
        except sqlite3.DatabaseError as exc:
            db.close()
            raise JournalReadError(f"{path}: not a readable journal ({exc})") from None
    raise JournalReadError(f"{path}: cannot be opened for reading")


@dataclass
class SessionReader:
    """Read access to one session directory; every ``iter_*``/``read_*`` reads from disk."""

    session_dir: Path
    skipped: list[int] = field(default_factory=lambda: [0])
    """Lines that could not be parsed (old JSON-lines sessions: a torn last line after a kill)."""
    _dbs: list[sqlite3.Connection] | None = None

    def __post_init__(self) -> None:
        self.session_dir = Path(self.session_dir)

    @property
    def legacy(self) -> bool:
        """Holds JSON-lines records (``infmon.session/1``)."""
        return (self.session_dir / LEGACY_RECORDS).exists()

    @property
    def format(self) -> str:
        kinds = (["jsonl"] if self.legacy else []) + (["sqlite"] if self.shards() else [])
        return "+".join(kinds) or "none"

    def shards(self) -> list[sqlite3.Connection]:
        if self._dbs is None:
            self._dbs = [_open(p) for p in shard_paths(self.session_dir)]
        return self._dbs

    def close(self) -> None:
        for db in self._dbs or ():
            db.close()
        self._dbs = None

    def __enter__(self) -> SessionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _meta_rows(self) -> dict[str, Any]:
        shards = self.shards()
        if not shards:
            return {}
        out = {}
        for key, value in shards[0].execute("SELECT key, value FROM meta"):
            try:
                out[key] = json.loads(value)
            except ValueError:
                continue
        return out

    @property
    def meta(self) -> dict[str, Any]:
        """``{"schema", "clock_origin", "config"}`` of the session."""
        meta = legacy.read_json(self.session_dir / legacy.CONFIG) or {}
        if meta and "schema" not in meta:
            meta = {"config": meta}
        new = self._meta_rows()
        new.pop("quality", None)
        return {**meta, **new}

    @property
    def config(self) -> dict[str, Any]:
        config = self.meta.get("config")
        return config if isinstance(config, dict) else {}

    def origin_s(self) -> float:
        """The session's perf_counter origin: recorded, else the first request's send time."""
        origin = (self.meta.get("clock_origin") or {}).get("perf_s")
        if isinstance(origin, (int, float)):
            return float(origin)
        cols = self.read_columns(chunks=False)
        return float(cols.sent_s.min()) if len(cols) else 0.0

    @property
    def quality(self) -> dict[str, Any] | None:
        found = self._meta_rows().get("quality")
        if isinstance(found, dict):
            return found
        return legacy.read_json(self.session_dir / legacy.QUALITY)

    # ---- records ------------------------------------------------------------------------------

    def record_count(self) -> int:
        n = sum(db.execute("SELECT count(*) FROM records").fetchone()[0] for db in self.shards())
        if self.legacy:
            with open(self.session_dir / LEGACY_RECORDS, "rb") as f:
                n += sum(1 for line in f if line.strip())
        return int(n)

    def endpoint_counts(self) -> dict[int, tuple[int, int]]:
        """Per endpoint index (``target``'s ``urls``): (requests, failed), over every shard;
        empty when the session had one endpoint (or predates the column)."""
        out: dict[int, tuple[int, int]] = {}
        for db in self.shards():
            if "endpoint" not in record_columns(db):
                continue
            for ep, n, bad in db.execute(
                "SELECT endpoint, count(*), sum(error_kind IS NOT NULL AND error_kind != "
                "'cancelled') FROM records WHERE endpoint IS NOT NULL GROUP BY endpoint"
            ):
                have = out.get(int(ep), (0, 0))
                out[int(ep)] = (have[0] + int(n), have[1] + int(bad or 0))
        return dict(sorted(out.items()))

    def steps(self) -> list[int]:
        """Every step index that has records, ascending."""
        found: set[int] = set()
        for db in self.shards():
            found.update(s for (s,) in db.execute("SELECT DISTINCT step FROM records"))
        if self.legacy:
            found.update(r.step for r in legacy.iter_records(self.session_dir, [0]))
        return sorted(found)

    def read_columns(
        self,
        step: int | None = None,
        since_s: float | None = None,
        until_s: float | None = None,
        chunks: bool = True,
    ) -> RecordColumns:
        """The records of the session (or of one step, or sent in ``[since_s, until_s)``, on
        the session's perf_counter clock) as columns; shards merged by send time."""
        parts = []
        if self.legacy:
            cols = self._legacy_columns()
            keep = np.ones(len(cols), dtype=bool)
            if step is not None:
                keep &= cols.step == step
            if since_s is not None:
                keep &= cols.sent_s >= since_s
            if until_s is not None:
                keep &= cols.sent_s < until_s
            parts.append(cols.take(keep))
        for db in self.shards():
            parts.append(sqlcols.read_columns(db, step, since_s, until_s, chunks))
        merged = RecordColumns.concat(parts)
        if len(self.shards()) > 1:
            merged = merged.take(np.argsort(merged.sent_s, kind="stable"))
        return merged

    def _legacy_columns(self) -> RecordColumns:
        return RecordColumns.from_records(list(legacy.iter_records(self.session_dir, [0])))

    def iter_step_columns(self) -> Iterator[tuple[int, RecordColumns]]:
        """``(step, its records)`` one step at a time (memory follows the largest step)."""
        if not self.legacy:
            for step in self.steps():
                yield step, self.read_columns(step=step)
            return
        yield from _group_steps(self.iter_records())

    def iter_records(self) -> Iterator[RequestRecord]:
        """Every record as an object (JSON lines first, then shards merged by send time)."""
        if self.legacy:
            yield from legacy.iter_records(self.session_dir, self.skipped)
        shards = self.shards()
        if len(shards) == 1:
            cols = select_records(shards[0])
            for row in shards[0].execute(f"SELECT {cols} FROM records ORDER BY rowid"):
                yield row_record(row)
            return
        streams = [
            (
                row_record(r)
                for r in db.execute(f"SELECT {select_records(db)} FROM records ORDER BY sent_s")
            )
            for db in shards
        ]
        yield from heapq.merge(*streams, key=lambda r: r.sent_s)

    # ---- scrapes and events -------------------------------------------------------------------

    def iter_scrapes(self) -> Iterator[dict[str, Any]]:
        """``{"t": perf_s, "snap": {...}}`` in the order they were taken (whole snapshots)."""
        yield from iter_jsonl(self.session_dir / legacy.SCRAPES, self.skipped)
        shards = self.shards()
        if not shards:
            return
        replay = ScrapeReplay()
        for t, keyframe, text in shards[0].execute(
            "SELECT t, keyframe, snap FROM scrapes ORDER BY rowid"
        ):
            try:
                row = json.loads(text)
            except ValueError:
                continue
            yield {"t": t, "snap": replay.snapshot(bool(keyframe), row)}

    def iter_scrape_pages(self) -> Iterator[tuple[float, bool, str]]:
        """The raw ``/metrics`` pages kept (at most one every minute): ``(t, truncated, text)``."""
        for db in self.shards()[:1]:
            for t, truncated, page in db.execute("SELECT t, truncated, page FROM scrape_pages"):
                yield float(t), bool(truncated), page

    def iter_events(self) -> Iterator[dict[str, Any]]:
        """``{"t", "wall", "kind", ...payload}`` in the order they happened."""
        yield from iter_jsonl(self.session_dir / legacy.EVENTS, self.skipped)
        for db in self.shards()[:1]:
            for (text,) in db.execute("SELECT event FROM events ORDER BY rowid"):
                try:
                    event = json.loads(text)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event


def _group_steps(records: Iterator[RequestRecord]) -> Iterator[tuple[int, RecordColumns]]:
    """Records grouped by ``record.step`` as they stream past; a step is complete (and given
    out) once records two steps later arrive. A record of a step already given out is dropped."""
    order: list[int] = []
    open_: dict[int, list[RequestRecord]] = {}
    done: set[int] = set()
    for r in records:
        if r.step not in open_:
            if r.step in done:
                continue
            order.append(r.step)
            open_[r.step] = []
        open_[r.step].append(r)
        for idx in [i for i in open_ if i <= r.step - 2]:
            done.add(idx)
            yield idx, RecordColumns.from_records(open_.pop(idx))
    for idx in list(open_):
        yield idx, RecordColumns.from_records(open_.pop(idx))
