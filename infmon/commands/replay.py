"""`infmon replay SESSION_DIR`: the monitor on a recorded session, with a time cursor.

``←``/``→`` move the cursor a second (shift: ten), ``[``/``]`` jump to the previous/next step
start or mark, ``space`` plays it at real speed, ``q`` quits. The panes are drawn from the
journal as they were at the cursor (``infmon.model.live.session_replay``); nothing is sent anywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from infmon.commands import CliError
from infmon.model.live.session import SessionConfig
from infmon.model.live.session_replay import Replay


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_dir", metavar="SESSION_DIR", help="a recorded session directory")
    parser.add_argument(
        "--at",
        type=float,
        default=None,
        metavar="S",
        help="start the cursor S seconds into the session (default: the first step's start)",
    )
    parser.add_argument("--theme", default=None, help="the UI theme")


def load_replay(session_dir: Path) -> Replay:
    """The session's journal, read once, as a ``Replay``."""
    from infmon.journal.reader import SessionReader, is_session_dir
    from infmon.report.stepstats import parse_slo

    if not is_session_dir(session_dir):
        raise CliError(f"{session_dir} is not a session directory (no journal in it)")
    with SessionReader(session_dir) as reader:
        cfg = reader.config
        step_s = cfg.get("step_duration_s")
        warmup = cfg.get("warmup_s")
        if not isinstance(warmup, (int, float)):
            warmup = 0.1 * step_s if isinstance(step_s, (int, float)) else 3.0
        config = SessionConfig(
            endpoint=str(cfg.get("url") or ""),
            slo=parse_slo(cfg.get("slo")) or SessionConfig().slo,
            step_warmup_s=float(warmup),
        )
        return Replay(
            reader.iter_records(),
            reader.iter_events(),
            reader.iter_scrapes(),
            config,
            start_s=reader.origin_s(),
        )


def run(args: argparse.Namespace) -> int:
    replay = load_replay(Path(args.session_dir))
    from infmon.ui.replay import ReplayApp

    start = replay.stops[0].t if replay.stops else replay.start_s
    at = replay.start_s + args.at if args.at is not None else start
    kw = {"theme_name": args.theme} if args.theme else {}
    ReplayApp(replay, at, **kw).run()
    return 0
