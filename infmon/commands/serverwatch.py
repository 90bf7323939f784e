"""The server's own view during `infmon bench`: scrape ``/metrics``, record it, note outages.

Every snapshot goes to the session record (``scrapes.jsonl``), so reports show the server's side.
Failed scrapes are counted by kind; the source going stale or down, coming back, and counter
resets (a server restart) are written as events with their times and summarised at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any

from infmon.clock import Clock
from infmon.commands.common import say
from infmon.journal import JournalWriter
from infmon.model.server import ServerSnapshot, SourceState
from infmon.sources.poller import MetricPoller
from infmon.sources.scraper import DirectSource


class ServerWatch:
    """Polls ``url``/metrics every ``interval_s`` while the load runs."""

    def __init__(self, url: str, interval_s: float, journal: JournalWriter, clock: Clock) -> None:
        self.journal = journal
        self.source = DirectSource(url, timeout_s=max(5.0, 2 * interval_s))
        self.poller = MetricPoller(
            self.source, interval_s, self._on_snapshot, clock, max_backoff_s=max(4.0, interval_s)
        )
        self.scrapes = 0
        self.failed: Counter[str] = Counter()
        self.restarts = 0
        self.outages: list[dict[str, Any]] = []
        self.no_metrics = False
        self._down: dict[str, Any] | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self.poller.run())

    async def stop(self, final_scrape: bool = False) -> None:
        """Stop polling; ``final_scrape`` takes the last counters, so the last step has rates."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            if final_scrape:
                await self.poller.poll_once()
        await self.source.aclose()
        if self._down is not None:  # still down at the end
            self.outages.append({**self._down, "end_s": None, "duration_s": None})

    def _on_snapshot(self, snap: ServerSnapshot) -> None:
        self.journal.write_scrape(snap)
        self.scrapes += 1
        t = snap.timestamp_s
        if snap.state == SourceState.NO_METRICS:
            if not self.no_metrics:
                self.no_metrics = True
                say("server metrics: none (the server publishes no /metrics)")
                self.journal.write_event("no_server_metrics", message=snap.error_message)
            return
        if snap.state != SourceState.OK:
            self.failed[snap.error_kind or "other"] += 1
            if self._down is None:
                self._down = {"start_s": t, "kind": snap.error_kind, "message": snap.error_message}
                self.journal.write_event(
                    "server_down",
                    t=t,
                    state=snap.state,
                    error_kind=snap.error_kind,
                    error=snap.error_message,
                )
            return
        if self._down is not None:
            outage = {**self._down, "end_s": t, "duration_s": t - self._down["start_s"]}
            self.outages.append(outage)
            self._down = None
            self.journal.write_event("server_up", t=t, down_s=outage["duration_s"])
        if snap.server_restarted:
            self.restarts += 1
            self.journal.write_event("restart", t=t, reason="server counters went back (restarted)")

    def summary(self, origin_s: float) -> dict[str, Any]:
        """Plain data for the bench result; times relative to the session start."""

        def rel(x: float | None) -> float | None:
            return None if x is None else round(x - origin_s, 3)

        return {
            "scrapes": self.scrapes,
            "failed_by_kind": dict(self.failed),
            "restarts": self.restarts,
            "no_metrics": self.no_metrics,
            "outages": [
                {
                    "start_s": rel(o["start_s"]),
                    "end_s": rel(o["end_s"]),
                    "duration_s": o["duration_s"],
                    "kind": o["kind"],
                }
                for o in self.outages
            ],
        }

    def describe(self) -> str:
        if self.no_metrics:
            return ""  # said when it was found
        failed = ", ".join(f"{k} {n}" for k, n in self.failed.most_common()) or "none"
        text = f"server metrics: {self.scrapes} scrapes, failed: {failed}, restarts seen: {self.restarts}"
        for o in self.outages:
            dur = "until the end" if o["duration_s"] is None else f"{o['duration_s']:.1f} s"
            text += f"\n  server unreachable for {dur} ({o['kind']})"
        return text
