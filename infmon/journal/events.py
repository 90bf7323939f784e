"""The journal's events other than a step's change: typed, as ``StepEvent`` is.

Each event is a frozen dataclass with its journal ``kind``, ``to_payload()`` (the fields the
journal line holds beside ``t``, ``wall`` and ``kind``, in the order they were always written)
and ``from_payload(line)`` (the event back from a journal line or a report's copy of it; None
when the line is not a usable one). ``JournalWriter.write(event)`` journals one. The format on
disk is the one the ad-hoc dicts wrote, so old journals read the same (``docs/journal.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Protocol, TypedDict

from infmon.model.base.jsontypes import JSON
from infmon.model.search.search_json import SearchDoc, SearchDocError, parse_search_doc
from infmon.model.steps.span import CLOSED, Mode, is_mode

Line = Mapping[str, object]
"""A journal event line (or a report's ``events[]`` entry: the same fields)."""


class JournalEvent(Protocol):
    """What ``JournalWriter.write`` takes."""

    @property
    def kind(self) -> str: ...

    def to_payload(self) -> Mapping[str, object]: ...


def _int(x: object) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _num(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _text(x: object) -> str | None:
    return x if isinstance(x, str) else None


def _of(line: Line, kind: str) -> bool:
    return line.get("kind") == kind


class LoadTotalsPayload(TypedDict):
    sent: int
    succeeded: int
    failed: int
    cancelled: int


@dataclass(frozen=True, slots=True)
class LoadTotals:
    """What the load engine sent and how it ended, when it stopped (bench and the monitor)."""

    KIND: ClassVar[str] = "load_totals"
    sent: int
    succeeded: int
    failed: int
    cancelled: int

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> LoadTotalsPayload:
        return {
            "sent": self.sent,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "cancelled": self.cancelled,
        }

    @classmethod
    def from_payload(cls, line: Line) -> LoadTotals | None:
        n = [_int(line.get(k)) for k in ("sent", "succeeded", "failed", "cancelled")]
        if not _of(line, cls.KIND) or any(x is None for x in n):
            return None
        return cls(*(x or 0 for x in n))


class StepPartialPayload(TypedDict):
    index: int
    label: str
    signal: str
    measured_s: float
    planned_s: float
    phase: str


@dataclass(frozen=True, slots=True)
class StepPartial:
    """A bench step a stop (Ctrl-C, SIGTERM) cut short: ended, but not a full step."""

    KIND: ClassVar[str] = "step_partial"
    index: int
    label: str
    signal: str
    measured_s: float
    planned_s: float
    phase: str

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> StepPartialPayload:
        return {
            "index": self.index,
            "label": self.label,
            "signal": self.signal,
            "measured_s": self.measured_s,
            "planned_s": self.planned_s,
            "phase": self.phase,
        }

    @classmethod
    def from_payload(cls, line: Line) -> StepPartial | None:
        index = _int(line.get("index"))
        if not _of(line, cls.KIND) or index is None:
            return None
        return cls(
            index,
            str(line.get("label")),
            str(line.get("signal")),
            _num(line.get("measured_s")) or 0.0,
            _num(line.get("planned_s")) or 0.0,
            _text(line.get("phase")) or "",
        )


@dataclass(frozen=True, slots=True)
class Note:
    """A line about the load that is not a step's change: ``sweep`` (the sweep or the search
    stopped, moved or held, in words) or an operator's ``mark``."""

    kind: str
    note: str

    def to_payload(self) -> dict[str, JSON]:
        return {"note": self.note}

    @classmethod
    def from_payload(cls, line: Line) -> Note | None:
        kind, note = line.get("kind"), line.get("note")
        if kind not in ("sweep", "mark") or not isinstance(note, str):
            return None
        return cls(kind, note)


@dataclass(frozen=True, slots=True)
class BaselineSet:
    """The operator made a step the baseline the panes compare against (None: no step yet)."""

    KIND: ClassVar[str] = "baseline"
    step: int | None

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> dict[str, JSON]:
        return {"step": self.step}

    @classmethod
    def from_payload(cls, line: Line) -> BaselineSet | None:
        return cls(_int(line.get("step"))) if _of(line, cls.KIND) else None


@dataclass(frozen=True, slots=True)
class LevelSet:
    """The monitor's dial set a level (journalled as ``concurrency`` or ``rate``)."""

    mode: Mode
    level: float
    origin: str

    @property
    def kind(self) -> str:
        return "concurrency" if self.mode == CLOSED else "rate"

    def to_payload(self) -> dict[str, JSON]:
        return {"mode": self.mode, "level": self.level, "origin": self.origin}

    @classmethod
    def from_payload(cls, line: Line) -> LevelSet | None:
        mode, level = line.get("mode"), _num(line.get("level"))
        if line.get("kind") not in ("concurrency", "rate") or not is_mode(mode) or level is None:
            return None
        return cls(mode, level, str(line.get("origin")))


@dataclass(frozen=True, slots=True)
class Paused:
    """The load paused (``pause``) or resumed (``resume``); no fields."""

    paused: bool

    @property
    def kind(self) -> str:
        return "pause" if self.paused else "resume"

    def to_payload(self) -> dict[str, JSON]:
        return {}

    @classmethod
    def from_payload(cls, line: Line) -> Paused | None:
        kind = line.get("kind")
        return cls(kind == "pause") if kind in ("pause", "resume") else None


@dataclass(frozen=True, slots=True)
class Ended:
    """How a run ended: the monitor's ``quit`` (its reason) or bench's ``interrupted`` (the
    signal that stopped it)."""

    kind: str
    why: str

    def to_payload(self) -> dict[str, JSON]:
        return {"reason" if self.kind == "quit" else "signal": self.why}

    @classmethod
    def from_payload(cls, line: Line) -> Ended | None:
        kind = line.get("kind")
        why = line.get("reason" if kind == "quit" else "signal")
        if kind not in ("quit", "interrupted") or not isinstance(why, str):
            return None
        return cls(kind, why)


@dataclass(frozen=True, slots=True)
class SearchStarted:
    """A load search began: its goal, bounds and budget of steps."""

    KIND: ClassVar[str] = "search"
    goal: str
    lo: float
    hi: float
    budget: int

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> dict[str, JSON]:
        return {"goal": self.goal, "lo": self.lo, "hi": self.hi, "budget": self.budget}

    @classmethod
    def from_payload(cls, line: Line) -> SearchStarted | None:
        lo, hi, budget = _num(line.get("lo")), _num(line.get("hi")), _int(line.get("budget"))
        if not _of(line, cls.KIND) or lo is None or hi is None or budget is None:
            return None
        return cls(str(line.get("goal")), lo, hi, budget)


@dataclass(frozen=True, slots=True)
class SearchMove:
    """The search's next probe: its level and why."""

    KIND: ClassVar[str] = "search_move"
    level: float
    why: str

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> dict[str, JSON]:
        return {"level": self.level, "why": self.why}

    @classmethod
    def from_payload(cls, line: Line) -> SearchMove | None:
        level = _num(line.get("level"))
        if not _of(line, cls.KIND) or level is None:
            return None
        return cls(level, str(line.get("why")))


@dataclass(frozen=True, slots=True)
class SearchVerdict:
    """The search's verdict: ``search.json``'s document, journalled as its fields."""

    KIND: ClassVar[str] = "search_verdict"
    doc: SearchDoc

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> SearchDoc:
        return self.doc

    @classmethod
    def from_payload(cls, line: Line) -> SearchVerdict | None:
        """The verdict back (the line's ``t``, ``wall`` and ``kind`` left out; None: not one
        ``parse_search_doc`` accepts)."""
        if not _of(line, cls.KIND):
            return None
        fields = {k: v for k, v in line.items() if k not in ("t", "wall", "kind")}
        try:
            return cls(parse_search_doc(fields))
        except SearchDocError:
            return None


@dataclass(frozen=True, slots=True)
class BenchSummary:
    """Bench's knee and SLO limit as it printed them (``bench --json``'s)."""

    KIND: ClassVar[str] = "bench_summary"
    knee: JSON
    slo_max_concurrency: JSON

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> dict[str, JSON]:
        return {"knee": self.knee, "slo_max_concurrency": self.slo_max_concurrency}

    @classmethod
    def from_payload(cls, line: Line) -> BenchSummary | None:
        knee, limit = line.get("knee"), line.get("slo_max_concurrency")
        if not _of(line, cls.KIND) or not (knee is None or isinstance(knee, Mapping)):
            return None
        return cls(knee, _int(limit))


@dataclass(frozen=True, slots=True)
class TargetResolved:
    """The server as the run resolved it: URL (``urls``: every endpoint, when several), model,
    endpoint and what it supports."""

    KIND: ClassVar[str] = "target"
    url: str | None
    model: str | None
    endpoint: str | None
    capabilities: Mapping[str, bool]
    """``stream_options``, ``vllm_fields``, ``per_request_metrics`` (bench's)."""
    urls: tuple[str, ...] = ()
    load_thread: str | None = None
    """How the load threads were scheduled (real-time or normal, and why)."""

    @property
    def kind(self) -> str:
        return self.KIND

    def to_payload(self) -> dict[str, JSON]:
        more: dict[str, JSON] = {"urls": list(self.urls)} if self.urls else {}
        if self.load_thread:
            more["load_thread"] = self.load_thread
        caps: dict[str, JSON] = dict(self.capabilities)
        return {
            **more,
            "url": self.url,
            "model": self.model,
            "endpoint": self.endpoint,
            "capabilities": caps,
        }

    @classmethod
    def from_payload(cls, line: Line) -> TargetResolved | None:
        if not _of(line, cls.KIND):
            return None
        caps = line.get("capabilities")
        urls = line.get("urls")
        return cls(
            _text(line.get("url")),
            _text(line.get("model")),
            _text(line.get("endpoint")),
            {str(k): v for k, v in caps.items() if isinstance(v, bool)}
            if isinstance(caps, Mapping)
            else {},
            tuple(str(u) for u in urls) if isinstance(urls, list) else (),
            _text(line.get("load_thread")),
        )
