"""The server's health from its scrapes: one state machine for bench, monitor and journal.

States: ``unknown`` (nothing seen yet), ``up``, ``down`` (since a time, with the error's kind),
``no_metrics`` (the server answers but publishes no ``/metrics``: not an outage). A stale
snapshot (the last scrape failed, older values still shown) counts as down from its first
failure. A counter going back is a restart, noted once per scrape that shows it. ``observe``
returns the events to journal and show: each is said once, when the state changes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from infmon.model.server.snapshot import ServerSnapshot, SourceState

UNKNOWN, UP, DOWN, NO_METRICS = "unknown", "up", "down", "no_metrics"


@dataclass(frozen=True, slots=True)
class HealthEvent:
    kind: str
    """``server_down``, ``server_up``, ``restart`` or ``no_server_metrics``."""
    t: float
    error_kind: str | None = None
    message: str | None = None
    down_s: float | None = None
    """How long the outage lasted (``server_up`` only)."""

    @property
    def text(self) -> str:
        if self.kind == "server_down":
            what = f"{self.error_kind}: {self.message}" if self.message else self.error_kind
            return f"server down: {what or 'no answer'}"
        if self.kind == "server_up":
            return f"server back up after {self.down_s:.1f} s" if self.down_s else "server back up"
        if self.kind == "restart":
            return "server restarted (counters reset)"
        return "the server publishes no /metrics: client view only"

    def payload(self) -> dict[str, object]:
        d: dict[str, object] = {"t": self.t}
        for key in ("error_kind", "message", "down_s"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        return d


@dataclass(frozen=True, slots=True)
class Outage:
    start_s: float
    end_s: float | None
    error_kind: str | None

    @property
    def duration_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.start_s


@dataclass(slots=True)
class ServerHealth:
    """See the module docstring."""

    state: str = UNKNOWN
    down_since_s: float | None = None
    last_error: str | None = None
    restarts: int = 0
    scrapes: int = 0
    failed_by_kind: Counter[str] = field(default_factory=Counter)
    outages: list[Outage] = field(default_factory=list)
    _down_kind: str | None = None

    def observe(self, snap: ServerSnapshot) -> tuple[HealthEvent, ...]:
        self.scrapes += 1
        t = snap.timestamp_s
        if snap.state == SourceState.NO_METRICS:
            if self.state == NO_METRICS:
                return ()
            self.state = NO_METRICS
            return (HealthEvent("no_server_metrics", t, message=snap.error_message),)
        if snap.state != SourceState.OK:
            self.failed_by_kind[snap.error_kind or "other"] += 1
            self.last_error = snap.error_message or snap.error_kind
            if self.state == DOWN:
                return ()
            self.state, self.down_since_s, self._down_kind = DOWN, t, snap.error_kind
            return (HealthEvent("server_down", t, snap.error_kind, snap.error_message),)
        events: list[HealthEvent] = []
        if self.state == DOWN and self.down_since_s is not None:
            self.outages.append(Outage(self.down_since_s, t, self._down_kind))
            events.append(HealthEvent("server_up", t, down_s=t - self.down_since_s))
        self.state, self.down_since_s, self.last_error = UP, None, None
        if snap.server_restarted:
            self.restarts += 1
            events.append(HealthEvent("restart", t))
        return tuple(events)

    def all_outages(self) -> tuple[Outage, ...]:
        """Every outage, the one still going (end None) included."""
        if self.state == DOWN and self.down_since_s is not None:
            return (*self.outages, Outage(self.down_since_s, None, self._down_kind))
        return tuple(self.outages)

    @property
    def up(self) -> bool:
        return self.state != DOWN
