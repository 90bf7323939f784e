"""The controller's plain data: what the workers found, counts, record batches, errors."""

from __future__ import annotations

from dataclasses import dataclass

from infmon.load.feed import WorkloadInfo
from infmon.model.records.request import RequestRecord
from infmon.model.steps.span import Level


class EngineError(Exception):
    """The load could not start (unreachable server, unknown model, bad dataset): one line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


@dataclass(frozen=True, slots=True)
class Target:
    """What the workers found on the server."""

    model: str | None
    endpoint: str | None
    stream_options: bool
    vllm_fields: bool
    workload: WorkloadInfo | None = None
    per_request_metrics: bool = False
    """Every response carries the server's own per-request timings (vLLM)."""
    load_thread: str = ""
    """How the workers' load threads are scheduled (``Ready.load_thread``; empty: not said)."""


@dataclass(frozen=True, slots=True)
class Totals:
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0

    def __add__(self, o: Totals) -> Totals:
        return Totals(
            self.sent + o.sent,
            self.succeeded + o.succeeded,
            self.failed + o.failed,
            self.cancelled + o.cancelled,
        )


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """Records from one worker, decoded; ``endpoints[i]`` is the endpoint index that served
    ``records[i]`` (None: one endpoint, or a record made before any endpoint was picked)."""

    worker_id: int
    records: list[RequestRecord]
    endpoints: list[int | None] | None = None


@dataclass(slots=True)
class _Held:
    """The level in force, so a worker's share can be re-split when another is lost."""

    step: int
    level: Level
    warmup_until_s: float
    budget: int | None = None
