"""A lost load worker replaced by a new one (``--ray-restart``).

Without a replacement the level stays re-split over the workers left (``infmon.engine.loss``).
With one, the controller asks for a new worker (a new id, so its records, windows and journal
shard are its own) as soon as the loss is seen; the new worker opens as the first ones did (a
Ray actor placed by the same strategy, its infmon checked against the controller's, its clock
measured) and finds the model; only then is the level split over it too and it takes load. A
replacement that cannot start is said, and the level stays where it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from infmon.engine.link import WorkerLink
from infmon.model.steps.book import Level

Replacement = Callable[[int, WorkerLink], WorkerLink]
"""Makes the link of a new worker (its id) for a lost one's link (raises when it cannot)."""

REPLACEMENTS_PER_WORKER = 3
"""A run replaces at most this many workers per worker it started with (a node that keeps
dying must not keep the run busy placing actors)."""


@dataclass(frozen=True, slots=True)
class WorkerJoin:
    """A replacement that took its share, or could not (``error``)."""

    worker_id: int
    replaces: int
    t: float
    description: str
    live_workers: int
    """Workers carrying the level now."""
    step: int | None
    level: Level | None
    error: str | None = None

    @property
    def text(self) -> str:
        workers = f"{self.live_workers} worker{'s' * (self.live_workers != 1)}"
        level = self.level.label if self.level is not None else "the load"
        if self.error is not None:
            return (
                f"worker {self.worker_id} could not replace worker {self.replaces} "
                f"({self.error}); {level} stays over {workers}"
            )
        return (
            f"{self.description} replaces worker {self.replaces}: {level} re-split over {workers}"
        )

    def payload(self) -> dict[str, object]:
        return {
            "t": self.t,
            "worker": self.worker_id,
            "replaces": self.replaces,
            "live_workers": self.live_workers,
            "step": self.step,
            "error": self.error,
            "text": self.text,
        }
