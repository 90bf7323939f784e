"""What the journal holds in memory while the disk refuses it, and how it reports that."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

HELD_OTHER = 20_000
"""Events and scrapes kept in memory while the disk refuses them."""


def short_reason(exc: BaseException) -> str:
    text = str(exc).lower()
    if "full" in text or "no space" in text:
        return "disk full"
    if "readonly" in text or "read-only" in text or "no longer writable" in text:
        return "read-only"
    if "disk i/o" in text or isinstance(exc, OSError):
        return "disk I/O error"
    return "write error"


@dataclass(frozen=True)
class JournalStatus:
    """How the journal is doing: what is on disk, what is held in memory, what failed; at the
    end, where held rows were saved when the disk still refused them, and what was lost."""

    written_records: int
    held_records: int
    dropped_records: int
    error: str | None = None
    """A short reason while writes fail ("disk full"); None when the last flush succeeded."""
    failing_since_wall_s: float | None = None
    errors: int = 0
    """Failed flushes so far (each retried)."""
    rescued_dir: str | None = None
    """Where the whole record went at the end (``infmon.journal.rescue``), if it had to."""
    rescued_records: int = 0
    """Held records saved in ``rescued_dir``."""
    lost_records: int = 0
    """Held records written nowhere at the end (both disks refused them)."""
    rescue_error: str | None = None
    """Why ``$TMPDIR`` refused them too."""

    @property
    def recorded_records(self) -> int:
        """Records this writer was given and has not dropped (on disk or held)."""
        return self.written_records + self.held_records + self.rescued_records

    @property
    def unwritten_records(self) -> int:
        """Records that will never be read back: dropped over the budget or lost at the end."""
        return self.dropped_records + self.lost_records

    @property
    def exit_code(self) -> int:
        """A run that lost records ends with status 3 (the figures leave them out)."""
        return 3 if self.unwritten_records else 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.dropped_records == 0

    def recorded_in(self, session_dir: object) -> str:
        """Where the session's record is now (the rescue directory, if it had to move)."""
        return self.rescued_dir or str(session_dir)

    def line(self) -> str | None:
        """The one line to show ("journal: disk full since 12:03:41, 1,204 records held in
        memory"; at the end, where they went or how many were lost), or None when all is well."""
        if self.ok:
            return None
        since = ""
        if self.failing_since_wall_s is not None:
            since = time.strftime(" since %H:%M:%S", time.localtime(self.failing_since_wall_s))
        head = f"journal: {self.error or 'write errors'}{since}"
        parts = []
        if self.held_records or not (self.rescued_dir or self.lost_records):
            parts.append(f"{self.held_records:,} records held in memory")
        if self.rescued_dir:
            parts.append(
                f"the session's record ({self.rescued_records:,} records held in memory "
                f"included) saved to {self.rescued_dir}"
            )
        if self.lost_records:
            why = f" ($TMPDIR too: {self.rescue_error})" if self.rescue_error else ""
            parts.append(f"{self.lost_records:,} records could not be written anywhere{why}")
        if self.dropped_records:
            parts.append(f"{self.dropped_records:,} dropped (over the memory budget)")
        return f"{head}, {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "written_records": self.written_records,
            "held_records": self.held_records,
            "dropped_records": self.dropped_records,
            "rescued_dir": self.rescued_dir,
            "rescued_records": self.rescued_records,
            "lost_records": self.lost_records,
            "rescue_error": self.rescue_error,
            "error": self.error,
            "failing_since_wall_s": self.failing_since_wall_s,
            "errors": self.errors,
            "line": self.line(),
        }


class Held:
    """Rows not yet committed, per table and shard."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[Any, ...]]] = {}
        self.events: list[tuple[Any, ...]] = []
        self.scrapes: list[tuple[Any, ...]] = []
        self.pages: list[tuple[Any, ...]] = []
        self.meta: dict[str, str] = {}

    def record_count(self) -> int:
        return sum(len(rows) for rows in self.records.values())

    def empty(self) -> bool:
        return not (self.record_count() or self.events or self.scrapes or self.pages or self.meta)

    def trim(self, budget: int) -> int:
        """Drop the oldest records past ``budget`` (and old events/scrapes); how many records."""
        dropped, excess = 0, self.record_count() - budget
        for rows in self.records.values():
            if excess <= 0:
                break
            cut = min(excess, len(rows))
            del rows[:cut]
            dropped, excess = dropped + cut, excess - cut
        for rows in (self.events, self.scrapes, self.pages):
            del rows[: max(0, len(rows) - HELD_OTHER)]
        return dropped
