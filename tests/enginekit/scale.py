"""Run a bench plan on several real load workers (processes or Ray actors) against a server,
the way ``infmon bench`` wires them, keeping what the live view saw (windows, losses)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infmon.clock import MonotonicClock
from infmon.commands.wiring import RunWiring
from infmon.config import Config
from infmon.engine.controller import LoadEngine, Totals
from infmon.engine.loss import WorkerLoss
from infmon.engine.protocol import Window
from infmon.engine.restart import Replacement, WorkerJoin
from infmon.engine.runner import StepRunner, StepSpec
from infmon.journal import JournalWriter
from infmon.model.steps.ledger import StepLedger


@dataclass
class Run:
    windows: list[Window] = field(default_factory=list)
    losses: list[WorkerLoss] = field(default_factory=list)
    joins: list[WorkerJoin] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    totals: Totals = field(default_factory=Totals)
    results: list[Any] = field(default_factory=list)

    def live_counts(self) -> Counter[str]:
        """What the merged live windows counted."""
        c: Counter[str] = Counter()
        for w in self.windows:
            c["sent"] += w.sent
            c["ok"] += w.finished
            c["failed"] += w.failed
            c["cancelled"] += w.cancelled
        return c


def journal_counts(session_dir: Path) -> Counter[str]:
    """Records in every shard of a session, by outcome."""
    c: Counter[str] = Counter()
    for path in sorted(session_dir.glob("journal*.sqlite")):
        db = sqlite3.connect(path)
        for kind, n in db.execute("SELECT error_kind, count(*) FROM records GROUP BY 1"):
            c["ok" if kind is None else ("cancelled" if kind == "cancelled" else "failed")] += n
            if kind is not None:
                c[kind] += n
        db.close()
    return c


async def run_plan(
    url: str,
    session_dir: Path,
    plan: Sequence[StepSpec],
    *,
    workers: int = 2,
    links: Sequence[Any] | None = None,
    during: Callable[[LoadEngine], Any] | None = None,
    replacement: Replacement | None = None,
    **config: Any,
) -> Run:
    """The plan on ``workers`` worker processes (or ``links``); ``during(engine)`` runs beside
    it (e.g. kills a worker)."""
    clock = MonotonicClock()
    cfg = Config(url=url, seed=11, **config)
    journal = JournalWriter(session_dir, clock)
    journal.write_config(cfg.to_public_dict())
    ledger = StepLedger(cfg.slo)
    wiring = RunWiring(journal, ledger)
    run = Run()
    wiring.on_window.append(run.windows.append)
    wiring.on_lost.append(run.losses.append)

    def joined(join: WorkerJoin) -> None:
        wiring.joined(join)
        run.joins.append(join)

    engine = LoadEngine(
        cfg,
        clock,
        on_records=wiring.records,
        on_window=wiring.window,
        on_event=lambda kind, text: run.events.append(text),
        on_lost=wiring.lost,
        workers=workers,
        links=links,
        log_dir=session_dir,
        replacement=replacement,
        on_joined=joined,
    )
    side = None
    try:
        await engine.start()
        journal.write_event("target", url=url, model=engine.target and engine.target.model)
        runner = StepRunner(engine, ledger, clock, on_events=wiring.step_events, tick_s=0.2)
        if during is not None:
            side = asyncio.ensure_future(during(engine))
        run.results = await runner.run(plan)
    finally:
        run.totals = await engine.stop()
        if side is not None:
            side.cancel()
        journal.close()
    return run


def merge_into_one_file(session_dir: Path, dest: Path) -> Path:
    """A copy of the session whose records all live in ``journal.sqlite`` (one file)."""
    dest.mkdir(parents=True)
    main = sqlite3.connect(session_dir / "journal.sqlite")
    main.execute(f"VACUUM INTO '{dest / 'journal.sqlite'}'")
    main.close()
    one = sqlite3.connect(dest / "journal.sqlite")
    for shard in sorted(session_dir.glob("journal.w*.sqlite")):
        one.execute("ATTACH DATABASE ? AS shard", (str(shard),))
        one.execute("INSERT INTO records SELECT * FROM shard.records")
        one.commit()
        one.execute("DETACH DATABASE shard")
    one.close()
    return dest
