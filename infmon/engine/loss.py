"""A lost load worker (its process crashed, its Ray actor was killed, its host went away).

What the controller knows of it is its last window: the requests it had in flight per step
then (at most one window, 250 ms, before it was lost). Those requests will never report, so
each becomes a record of kind ``worker_lost`` (no chunks, sent at that window's end, ended
when the loss was seen, in its step), and the journal, the ledger and every report count them
where they belong; the level is then split over the workers that remain.
"""

from __future__ import annotations

from dataclasses import dataclass

from infmon.model.records.request import ErrorKind, RequestRecord
from infmon.model.steps.span import CLOSED, Level


@dataclass(frozen=True, slots=True)
class WorkerLoss:
    """One lost worker, as the event, the journal and the report say it."""

    worker_id: int
    t: float
    reason: str
    inflight: int
    """Requests in flight at its last window, now counted as ``worker_lost``."""
    by_step: tuple[tuple[int, int], ...]
    live_workers: int
    """Workers left; the level is re-split over them."""
    step: int | None
    level: Level | None
    last_report_age_s: float | None = None
    """How long before the loss its last window came: the requests that finished on the server
    in that time never reported (at most ``inflight`` of them)."""
    replacing: bool = False
    """A replacement is being started (``--ray-restart``): the re-split lasts until it joins."""

    @property
    def text(self) -> str:
        streams = f"{self.inflight} stream{'s' * (self.inflight != 1)} in flight"
        where = (
            f"; {self.level.label} re-split over {self.live_workers} worker"
            f"{'s' * (self.live_workers != 1)}"
            if self.level is not None and self.live_workers
            else ""
        )
        if not self.live_workers:
            where = "; no load worker is left: the load stopped"
        if self.replacing:
            where += " until its replacement joins"
        unreported = ""
        if self.inflight and self.last_report_age_s is not None:
            unreported = (
                f" (≤ {self.inflight} of them may have finished on the server unreported: its "
                f"last report came {self.last_report_age_s * 1e3:,.0f} ms before)"
            )
        return (
            f"worker {self.worker_id} lost ({self.reason}), {streams}, counted as "
            f"`{ErrorKind.WORKER_LOST}`{unreported}{where}"
        )

    def payload(self) -> dict[str, object]:
        return {
            "t": self.t,
            "worker": self.worker_id,
            "reason": self.reason,
            "inflight": self.inflight,
            "by_step": [list(x) for x in self.by_step],
            "live_workers": self.live_workers,
            "step": self.step,
            "replacing": self.replacing,
            "text": self.text,
        }


def lost_records(
    loss: WorkerLoss, first_id: int, sent_s: float, warmup_until_s: float | None
) -> list[RequestRecord]:
    """One ``worker_lost`` record per request in flight at the worker's last window."""
    out = []
    rid = first_id
    level = loss.level
    for step, n in loss.by_step:
        here = level if step == loss.step else None
        for _ in range(n):
            out.append(
                RequestRecord(
                    request_id=rid,
                    sent_s=sent_s,
                    end_s=loss.t,
                    error_kind=ErrorKind.WORKER_LOST,
                    error_message=f"worker {loss.worker_id} lost ({loss.reason})",
                    step=step,
                    concurrency=int(here.value) if here and here.mode == CLOSED else None,
                    rate=here.value if here and here.mode != CLOSED else None,
                    warmup=bool(here) and warmup_until_s is not None and sent_s < warmup_until_s,
                )
            )
            rid += 1
    return out
