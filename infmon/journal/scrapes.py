"""What the journal keeps of server scrapes: a bounded, deduplicated view, never every label set.

A scrape is the canonical snapshot (``ServerSnapshot.to_dict()``). Its numbers are written every
time; its structured values (cache config, model list, per-engine rows, latency windows, …)
only when they change, and all of it again in a *keyframe* every ``keyframe_s`` so that a reader
can start anywhere. Lists and maps are cut to ``max_items`` entries (the number cut is kept), a
row is cut to its numbers past ``max_row_bytes``, and past ``budget_bytes`` for the session only
keyframes are written. The raw ``/metrics`` page, when the caller passes it, is kept at most
every ``raw_every_s``, cut to ``raw_max_bytes``, within ``raw_budget_bytes``. A server whose label
cardinality explodes (a new label set per scrape) therefore adds at most about
``max_row_bytes`` per scrape and a page a minute, and after the budget a row a keyframe.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from infmon.journal.jsonio import null_nonfinite

_SCALARS = (int, float, str, bool)


@dataclass(frozen=True)
class ScrapeBudget:
    keyframe_s: float = 60.0
    max_items: int = 64
    max_row_bytes: int = 16_384
    budget_bytes: int = 256 * 2**20
    raw_every_s: float = 60.0
    raw_max_bytes: int = 2**20
    raw_budget_bytes: int = 64 * 2**20


def _bounded(value: Any, max_items: int) -> tuple[Any, int]:
    """``value`` with lists and maps cut to ``max_items`` (recursively); how many were cut."""
    cut = 0
    if isinstance(value, dict):
        items = list(value.items())
        cut += max(0, len(items) - max_items)
        out = {}
        for k, v in items[:max_items]:
            out[k], c = _bounded(v, max_items)
            cut += c
        return out, cut
    if isinstance(value, (list, tuple)):
        cut += max(0, len(value) - max_items)
        kept = []
        for v in value[:max_items]:
            b, c = _bounded(v, max_items)
            kept.append(b)
            cut += c
        return kept, cut
    return value, 0


@dataclass
class ScrapeFilter:
    """Turns snapshots into journal rows ``(t, keyframe, snap_json)`` within a budget."""

    budget: ScrapeBudget = field(default_factory=ScrapeBudget)
    written_bytes: int = 0
    raw_bytes: int = 0
    rows_cut: int = 0
    """Rows cut to their numbers (too large) or skipped (over the session budget)."""
    _last: dict[str, Any] = field(default_factory=dict)
    _last_key_t: float = -math.inf
    _last_raw_t: float = -math.inf

    def row(self, t: float, snap: dict[str, Any]) -> tuple[float, int, str] | None:
        """The row to write for this snapshot, or None (over budget between keyframes)."""
        b = self.budget
        keyframe = t - self._last_key_t >= b.keyframe_s
        if self.written_bytes >= b.budget_bytes and not keyframe:
            self.rows_cut += 1
            return None
        full, cut = _bounded(snap, b.max_items)
        full = null_nonfinite(full)
        if cut:
            full["items_cut"] = cut
        out = {}
        for k, v in full.items():
            if keyframe or isinstance(v, _SCALARS) or self._last.get(k) != v:
                out[k] = v
        for k in self._last.keys() - full.keys():
            if not keyframe:
                out[k] = None  # gone since the last row
        text = json.dumps(out, separators=(",", ":"), allow_nan=False)
        if len(text) > b.max_row_bytes:
            numbers = {k: v for k, v in full.items() if isinstance(v, _SCALARS)}
            numbers["row_cut"] = True
            text, keyframe, full = json.dumps(numbers, separators=(",", ":")), True, numbers
            self.rows_cut += 1
        self._last = full
        if keyframe:
            self._last_key_t = t
        self.written_bytes += len(text)
        return (t, int(keyframe), text)

    def page(self, t: float, raw: str | bytes | None) -> tuple[float, int, str] | None:
        """The raw page to keep with this scrape, or None (too soon, or over budget)."""
        b = self.budget
        if raw is None or t - self._last_raw_t < b.raw_every_s:
            return None
        if self.raw_bytes >= b.raw_budget_bytes:
            return None
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        truncated = len(text) > b.raw_max_bytes
        text = text[: b.raw_max_bytes]
        self._last_raw_t = t
        self.raw_bytes += len(text)
        return (t, int(truncated), text)


@dataclass
class ScrapeReplay:
    """Rebuilds whole snapshots from journal rows (carrying unchanged values forward)."""

    _state: dict[str, Any] = field(default_factory=dict)

    def snapshot(self, keyframe: bool, row: dict[str, Any]) -> dict[str, Any]:
        state = self._state = {} if keyframe else self._state
        for k, v in row.items():
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
        return dict(state)
