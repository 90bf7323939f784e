"""The append-only session record: config, request records, scrapes, events (SQLite, WAL).

The session directory holds ``journal.sqlite`` (tables ``meta``, ``records``, ``events``,
``scrapes``, ``scrape_pages``; ``docs/journal.md``) and, with several load workers, one
``journal.wN.sqlite`` per worker N > 0 for its records (``write_record(record, worker=N)``);
readers merge the shards by send time.

Writers append to an in-memory buffer (cheap, safe to call from the asyncio loop); a daemon
thread turns the buffer into rows and commits them every ``flush_interval_s`` (0.5 s by default),
one transaction per shard, so a killed process loses at most about that much (a WAL commit is in
the OS's hands once it returns; ``synchronous=NORMAL`` skips only the fsync, which matters for
power loss, not for a killed process). Nothing is kept after it is committed: memory stays flat.

Where the encoding runs was measured (``bench/client_overhead.py``, infmon's load client pinned
to one core). On the thread it competes with the client's loop for that core: with ``--stress``
at 256 streams (~600 requests/s) the loop waited 97–105 ms per 5 s window for the core against
13–31 ms with ``--no-journal``. On the loop instead, a batch of streams that ends in one engine
step is encoded in one go while the next requests' first chunks wait: client-added TTFT median
2.25 ms at 256 streams in the default scenario, against 0.02–0.20 ms with the thread. So the
thread stays, and what it does per record got cheaper with SQLite: the chunk offsets of a whole
batch are one numpy pass and SQLite packs the row in C, 6.2–7.6 µs of the thread's CPU per
32-chunk record against 15.3 µs for the JSON line (``bench/journal_format.py``, 300 and 25
records a flush). With the client (``client_overhead.py --quick --stress --concurrency 256``,
three runs each, interleaved, on a shared machine): client-added TTFT p50/p99 0.30–0.50 /
5.0–12.7 ms and runq wait 137–411 ms per 5 s window with this journal, 0.21–0.39 / 15.8–89.9 ms
and 541–1,170 ms with the JSON lines, 0.26 / 5.7 ms and 160 ms with none (one run).

Why SQLite (``bench/journal_format.py``, 300k records): columnar segments (numpy arrays per
flush in an append-only file, a small index) were cheaper still (3.4–5.9 µs a record to write,
every record read back in 0.28 s against 1.18 s, 200 against 226 bytes a record), but a
session must open in ``sqlite3``, DuckDB or pandas without infmon, and SQLite gives that with
its indexes (one step of 40k records in 0.09 s, one minute in 0.008 s) and crash safety from a
well-tried engine, while still meeting the report targets (a day, 4.3M records, reported in
22.4 s and 303 MB: ``bench/report_scale.py``).

When the disk fails (full, read-only, I/O error) the rows stay in memory, up to ``held_budget``
records (the oldest beyond it are dropped and counted); they are tried again after 0.5 s,
then after twice as long each time up to 30 s (each try re-inserts every held row), and
``status()`` says what happened ("journal: disk full since 12:03:41, 1,204 records held in
memory"). The run goes on. If the disk still refuses them at ``close()``, the session's whole
record is saved to a private directory instead (``infmon.journal.rescue``), or what could not
be written anywhere is counted as lost (``JournalStatus.lost_records``).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from infmon.clock import Clock, MonotonicClock, wall_time
from infmon.journal.events import JournalEvent
from infmon.journal.held import Held, JournalStatus, short_reason
from infmon.journal.jsonio import dumps, write_json_atomic
from infmon.journal.redact import redact
from infmon.journal.rescue import rescue
from infmon.journal.rows import INSERT_RECORD, record_rows
from infmon.journal.scrapes import ScrapeBudget, ScrapeFilter
from infmon.journal.store import (
    SCHEMA,
    SessionLock,
    check_session_dir,
    connect,
    shard_name,
)
from infmon.model.base.sanitize import redact_url
from infmon.model.records.request import RequestRecord
from infmon.model.server.snapshot import ServerSnapshot

_MAX_BUFFERED = 20_000
_RETRY_MAX_S = 30.0
"""Longest wait between two tries of a failing disk (each try re-inserts every held row)."""
ABANDONED: list[sqlite3.Connection] = []
"""Connections to files that stopped being writable: closing one (also at interpreter exit)
checkpoints through the mapped ``-shm`` file, which is SIGBUS on an immutable file, so the
process ends with ``os._exit`` while they exist (``infmon.cli.main``)."""
HELD_BUDGET = 200_000
"""Records kept in memory while the disk refuses them (≈100 MB); older ones are dropped."""

__all__ = ["HELD_BUDGET", "JournalStatus", "JournalWriter", "dumps", "write_json_atomic"]


class JournalWriter:
    """Appends a session's record to ``session_dir`` as it happens; see the module docstring."""

    def __init__(
        self,
        session_dir: Path,
        clock: Clock | None = None,
        flush_interval_s: float = 0.5,
        autoflush: bool = True,
        *,
        held_budget: int = HELD_BUDGET,
        scrape_budget: ScrapeBudget | None = None,
    ) -> None:
        self.session_dir = check_session_dir(Path(session_dir))
        self._session_lock = SessionLock(self.session_dir)
        self.clock = clock or MonotonicClock()
        self.origin = {"perf_s": self.clock.now(), "wall_s": wall_time()}
        self._lock = threading.Lock()
        self._io_lock = threading.Lock()
        self._records: dict[int, list[RequestRecord]] = {}
        self._endpoints: dict[int, list[int | None]] = {}
        """Per worker, aligned with ``_records`` once any record there named its endpoint."""
        self._events: list[tuple[Any, ...]] = []
        self._scrapes: list[tuple[Any, ...]] = []
        self._pages: list[tuple[Any, ...]] = []
        self._buffered = 0
        self._held = Held()
        self._held_budget = held_budget
        self._scrape_filter = ScrapeFilter(scrape_budget or ScrapeBudget())
        self._dbs: dict[int, sqlite3.Connection] = {}
        self._written = self._dropped = self._errors = 0
        self._rescued = self._lost = 0
        self._rescued_dir: Path | None = None
        self._rescue_error: str | None = None
        self._untouchable = False
        """The session's files stopped being writable: never touched again (SIGBUS)."""
        self._error: str | None = None
        self._retry_delay_s, self._retry_at = 0.0, 0.0
        self._failing_since: float | None = None
        try:
            self._db(0)
        except sqlite3.Error as exc:
            self._session_lock.release()
            raise OSError(f"cannot open the journal in {self.session_dir}: {exc}") from None
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if autoflush:
            self._thread = threading.Thread(
                target=self._flush_loop,
                args=(flush_interval_s,),
                name="infmon-journal",
                daemon=True,
            )
            self._thread.start()

    # ---- the writers' API (cheap; any thread, the asyncio loop included) ----------------------

    def write_config(self, config: dict[str, Any]) -> None:
        """Store the configuration (every secret redacted) and the clock origin, at once."""
        with self._lock:
            self._held.meta.update(
                schema=json.dumps(SCHEMA),
                clock_origin=json.dumps(self.origin),
                config=dumps(redact(config)),
            )
        self.flush()

    def write_record(
        self, record: RequestRecord, worker: int = 0, endpoint: int | None = None
    ) -> None:
        """A finished request; ``worker`` names the load worker (one shard file per worker),
        ``endpoint`` the server that took it when there are several (``target``'s ``urls``)."""
        with self._lock:
            self._check_open()
            self._records.setdefault(worker, []).append(record)
            if endpoint is not None or worker in self._endpoints:
                eps = self._endpoints.setdefault(worker, [None] * (len(self._records[worker]) - 1))
                eps.append(endpoint)
            self._buffered += 1
            full = self._buffered >= _MAX_BUFFERED
        if full:
            self.flush()

    def write_scrape(
        self, snapshot: ServerSnapshot | Mapping[str, object], raw_page: str | bytes | None = None
    ) -> None:
        """A ``ServerSnapshot`` or its keys as a mapping (an imported or synthetic scrape),
        bounded and deduplicated (``infmon.journal.scrapes``); ``raw_page`` is the ``/metrics``
        text."""
        whole: Mapping[str, object] = (
            snapshot.to_dict() if isinstance(snapshot, ServerSnapshot) else snapshot
        )
        snap = {k: v for k, v in whole.items() if v not in (None, {}, [], ())}
        t = snap.get("timestamp_s", snap.get("t"))
        t = float(t) if isinstance(t, (int, float)) else self.clock.now()
        with self._lock:
            self._check_open()
            row = self._scrape_filter.row(t, snap)
            page = self._scrape_filter.page(t, raw_page)
            if row is not None:
                self._scrapes.append(row)
            if page is not None:
                self._pages.append(page)

    def write_event(self, kind: str, **payload: Any) -> None:
        """Operator action or notable event (mark, baseline, concurrency, step, error, …)."""
        t = payload.pop("t", None)
        line = {"t": self.clock.now() if t is None else t, "wall": wall_time(), "kind": kind}
        line.update(payload)
        row = (float(line["t"]), kind, redact_url(dumps(line)))  # a URL's password too
        with self._lock:
            self._check_open()
            self._events.append(row)

    def write(self, event: JournalEvent) -> None:
        """A typed event (``infmon.journal.events``): its kind and payload, as ``write_event``."""
        self.write_event(event.kind, **event.to_payload())

    def write_quality(self, result: dict[str, Any]) -> None:
        """Store a quality run's result (also noted as an event, and kept as ``quality.json``
        beside the journal for ``--baseline`` and for readers without SQLite)."""
        with self._lock:
            self._held.meta["quality"] = dumps(result)
        with contextlib.suppress(OSError):  # the journal's copy is the one that counts
            write_json_atomic(self.session_dir / "quality.json", result)
        self.write_event(
            "quality",
            accuracy=result.get("accuracy"),
            agreement=result.get("agreement"),
            probes=result.get("probes"),
        )
        self.flush()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("journal is closed")

    # ---- the writer's thread ------------------------------------------------------------------

    def status(self) -> JournalStatus:
        with self._lock:
            return JournalStatus(
                written_records=self._written,
                held_records=self._held.record_count(),
                dropped_records=self._dropped,
                error=self._error,
                failing_since_wall_s=self._failing_since,
                errors=self._errors,
                rescued_dir=str(self._rescued_dir) if self._rescued_dir else None,
                rescued_records=self._rescued,
                lost_records=self._lost,
                rescue_error=self._rescue_error,
            )

    def flush(self, force: bool = False) -> None:
        """Commit everything buffered so far (to the OS: survives a killed process). A failing
        disk is recorded in ``status()``, never raised: the rows stay held for the next try,
        which waits longer after each failure (0.5 s doubling to 30 s; ``force``: now)."""
        with self._io_lock:
            if self._closed:
                return
            with self._lock:
                records, self._records, self._buffered = self._records, {}, 0
                endpoints, self._endpoints = self._endpoints, {}
                held = self._held
                held.events += self._events
                held.scrapes += self._scrapes
                held.pages += self._pages
                self._events, self._scrapes, self._pages = [], [], []
            for worker, recs in records.items():
                rows = record_rows(recs, worker, endpoints.get(worker))
                held.records.setdefault(worker, []).extend(rows)
            if self._error is not None and not force and self.clock.now() < self._retry_at:
                with self._lock:
                    self._dropped += held.trim(self._held_budget)
                return
            try:
                self._check_files()
                written = self._commit(held)
            except (sqlite3.Error, OSError) as exc:
                self._failed(exc)
                return
            with self._lock:
                self._written += written
                self._error = self._failing_since = None
                self._retry_delay_s = 0.0

    def _check_files(self) -> None:
        """Refuse to touch files that stopped being writable (made immutable or read-only
        under a running process): SQLite's next write to its mapped ``-shm`` would be SIGBUS."""
        for worker in self._dbs:
            for suffix in ("", "-wal", "-shm"):
                path = f"{self.session_dir / shard_name(worker)}{suffix}"
                if os.path.exists(path) and not os.access(path, os.W_OK):
                    self._untouchable = True
                    raise OSError(errno.EPERM, "session files no longer writable", path)

    def _commit(self, held: Held, shard: Callable[[int], sqlite3.Connection] | None = None) -> int:
        """Commit ``held`` (one transaction per shard; ``shard``: worker → connection, the
        session's own by default); committed rows leave ``held``."""
        written = 0
        for worker in sorted(set(held.records) | {0}):
            db, rows = (shard or self._db)(worker), held.records.get(worker, [])
            main = worker == 0
            if not rows and not (main and (held.events or held.scrapes or held.pages or held.meta)):
                continue
            try:
                db.execute("BEGIN")
                db.executemany(INSERT_RECORD, rows)
                if main:
                    db.executemany("INSERT INTO events VALUES (?, ?, ?)", held.events)
                    db.executemany("INSERT INTO scrapes VALUES (?, ?, ?)", held.scrapes)
                    db.executemany("INSERT INTO scrape_pages VALUES (?, ?, ?)", held.pages)
                    db.executemany(
                        "INSERT OR REPLACE INTO meta VALUES (?, ?)", list(held.meta.items())
                    )
                db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
                raise
            written += len(rows)
            held.records.pop(worker, None)
            if main:
                held.events, held.scrapes, held.pages, held.meta = [], [], [], {}
        return written

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._errors += 1
            self._error = short_reason(exc)
            if self._failing_since is None:
                self._failing_since = wall_time()
            self._dropped += self._held.trim(self._held_budget)
            self._retry_delay_s = min(_RETRY_MAX_S, max(0.5, 2 * self._retry_delay_s))
            self._retry_at = self.clock.now() + self._retry_delay_s

    def _db(self, worker: int) -> sqlite3.Connection:
        db = self._dbs.get(worker)
        if db is None:
            db = self._dbs[worker] = connect(self.session_dir / shard_name(worker))
        return db

    def _flush_loop(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            try:
                self.flush()
            except (sqlite3.Error, OSError, ValueError):
                continue

    # ---- ending ---------------------------------------------------------------------------------

    def _close_dbs(self, tidy: bool) -> None:
        if self._untouchable:  # closing checkpoints through the -shm map: never closed
            ABANDONED.extend(self._dbs.values())
            self._dbs.clear()
            self._session_lock.release()
            return
        for db in self._dbs.values():
            with contextlib.suppress(sqlite3.Error):
                if tidy:  # one self-contained file per shard, readable from read-only media
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                    db.execute("PRAGMA journal_mode = DELETE")
                db.close()
        self._dbs.clear()
        self._session_lock.release()

    def abandon(self) -> None:
        """Stop without the ``session_end`` event, as a killed process would (for tests)."""
        self._stop.set()
        with self._io_lock, self._lock:
            self._closed = True
            self._close_dbs(tidy=False)

    def close(self) -> None:
        """Flush everything, note ``session_end`` and close (a clean end)."""
        if self._closed:
            return
        self.write_event("session_end")
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.flush(force=True)
        with self._io_lock:
            if self._error is not None and not self._held.empty():
                self._rescue()
            with self._lock:
                self._closed = True
                self._close_dbs(tidy=self._error is None)

    def _rescue(self) -> None:
        """The disk still refuses the held rows: save the whole record elsewhere
        (``infmon.journal.rescue``) or count them as lost."""
        held = self._held.record_count()
        try:
            shards = sorted(self._dbs)
            where, written = rescue(self.session_dir, shards, self._held, self._commit)
        except (sqlite3.Error, OSError) as exc:
            with self._lock:
                self._lost += self._held.record_count()
                self._held.records.clear()
                self._rescue_error = short_reason(exc)
            return
        with self._lock:
            self._rescued_dir, self._rescued = where, written
            self._lost += held - written

    def __enter__(self) -> JournalWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
