"""``--baseline RUN`` for the live monitor: load the run, hand it to the session, and give the
session a thread to compute the comparison on (bootstraps stay off the render loop)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from infmon.commands import CliError
from infmon.model.compare.baseline import Reference
from infmon.model.live.session import Session


def load_reference(path: str | None) -> Reference | None:
    """The baseline run (None without ``--baseline``); a clear error for a path that is not
    a session, a report.json or a vLLM bench result."""
    if not path:
        return None
    from infmon.report.runs import RunLoadError, load_run

    try:
        return load_run(Path(path)).reference()
    except (RunLoadError, OSError) as exc:
        raise CliError(f"--baseline {path}: {exc}") from None


def watch_baseline(session: Session, reference: Reference, now: float) -> None:
    """Compare the session's levels with ``reference``'s from now on, on a daemon-less
    one-thread pool (it ends with the process; each job is one comparison)."""
    session.set_reference(reference, now)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="infmon-baseline")
    session.method.submit = pool.submit
