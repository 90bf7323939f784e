"""A lost load worker replaced by a new one (``--ray-restart``).

Without a replacement the level stays re-split over the workers left (``infmon.engine.loss``).
With one, the controller asks for a new worker (a new id, so its records, windows and journal
shard are its own) as soon as the loss is seen; the new worker opens as the first ones did (a
Ray actor placed by the same strategy, its infmon checked against the controller's, its clock
measured) and finds the model; only then is the level split over it too and it takes load. A
replacement that cannot start is said, and the level stays where it was.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass

from infmon.clock import Clock
from infmon.config import Config
from infmon.engine import protocol as p
from infmon.engine.link import WorkerLink
from infmon.engine.types import _Held
from infmon.model.steps.span import Level

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


class ReplacingEngine:
    """The load engine's part that replaces lost workers (``LoadEngine`` is one): what it
    reads of the engine is declared here, the engine sets it."""

    config: Config
    clock: Clock
    links: list[WorkerLink]
    replacement: Replacement | None
    on_event: Callable[[str, str], None]
    on_joined: Callable[[WorkerJoin], None]
    retry_s: float | None
    urls: tuple[str, ...]
    spread: str
    _held: _Held | None
    _paused: bool
    _stopping: bool
    _budget: bool
    _joining: dict[int, int]
    """Replacements not carrying load (starting, or failed to): new worker → lost one."""
    _join_failed: set[int]
    _replacements_left: int

    @property
    def workers(self) -> int:
        return len(self.links)

    @property
    def live(self) -> list[int]:
        raise NotImplementedError

    def _receive(self, msg: object) -> None:
        raise NotImplementedError

    def _send_level(self) -> None:
        raise NotImplementedError

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        raise NotImplementedError

    async def _watch(self, link: WorkerLink) -> None:
        raise NotImplementedError

    async def _replace(self, lost: int) -> None:
        """Start a new worker for ``lost``: placed, checked and its clock set by its link's
        ``open``, then started; it takes load at its ``Ready`` (``_joined``)."""
        assert self.replacement is not None
        self._replacements_left -= 1
        new = len(self.links)
        try:
            link = self.replacement(new, self.links[lost])
        except Exception as exc:  # RaySetupError and kin: no node for it
            self._fail_join(new, lost, _one_line(exc))
            return
        self.links.append(link)
        self._joining[new] = lost
        try:
            await link.open(self._receive)
        except Exception as exc:  # EngineError (placement, version), Ray's own errors
            self._joined(new, _one_line(exc))
            return
        if self._stopping:
            return
        seed = self.config.seed + new
        link.send(
            p.Start(
                new, new, self.workers, self.config, seed, self.retry_s,
                urls=self.urls, spread=self.spread,
            )
        )  # fmt: skip
        self._spawn(self._watch(link))

    def _joined(self, w: int, error: str | None = None) -> None:
        """Replacement ``w`` found the model (it takes its share now) or failed (``error``)."""
        lost = self._joining.get(w)
        if lost is None or w in self._join_failed:
            return
        if error is not None:
            self._fail_join(w, lost, error)
            return
        del self._joining[w]
        link, held = self.links[w], self._held
        self._send_level()
        if self._budget:
            link.send(p.LimitSends(0))
        if not self._paused and held is not None:
            link.send(p.Resume(held.warmup_until_s))
        self._tell_join(WorkerJoin(
            w, lost, self.clock.now(), link.description, len(self.live),
            held.step if held else None, held.level if held else None,
        ))  # fmt: skip

    def _fail_join(self, w: int, lost: int, error: str) -> None:
        self._join_failed.add(w)
        held = self._held
        self._tell_join(WorkerJoin(
            w, lost, self.clock.now(), f"worker {w}", len(self.live),
            held.step if held else None, held.level if held else None, error,
        ))  # fmt: skip

    def _tell_join(self, join: WorkerJoin) -> None:
        self.on_event("error" if join.error else "load", join.text)
        self.on_joined(join)


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
