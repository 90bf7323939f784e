"""`infmon method URL --label NAME`: the A/B method as one path.

A sweep (``bench``'s engine and step plan, the seed recorded) and the quality probes, written
as a session (``runs/NAME`` by default); then, without ``--baseline``, it waits: "change one
thing on the server, then press Enter". With ``--baseline runs/baseline`` (or after Enter) the
run repeats the baseline's workload exactly (its levels, step times, prompt and output lengths,
seed: read from the baseline's recorded config), prints each step's deltas under its row,
probes quality against the baseline's answers, and writes the comparison beside the sessions:
``compare.txt``/``compare.json`` in the session, and ``runs/compare.txt``/``.json`` over every
run of that baseline so far. ``--headless`` never waits (scripts, CI); ``--fail-if`` rules set
the exit status (0: none failed, 1: a rule failed; 2: an error).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infmon.commands import CliError, abab, bench, quality
from infmon.commands.against import finish as finish_against
from infmon.commands.against import read_options, write_comparison
from infmon.commands.common import say
from infmon.commands.load_args import add_load_arguments
from infmon.commands.search_args import add_search_arguments
from infmon.commands.trials_out import add_trial_arguments
from infmon.journal.safefile import write_text_atomic

METHOD_FILE = "method.json"
"""In each session the method wrote: its label and the baseline it was compared with."""
DEFAULT_LEVELS = "1,2,4,8,16"
DEFAULT_SEED = "1"

REPEATED = {
    # recorded config key → command-line option (the workload a second run repeats)
    "concurrency": "concurrency",
    "rate": "rate",
    "step_duration_s": "step_duration",
    "step_requests": "step_requests",
    "warmup_s": "warmup",
    "prompt_tokens": "prompt_tokens",
    "output_tokens": "output_tokens",
    "lockstep": "lockstep",
    "workload": "workload",
    "dataset": "dataset",
    "shared_prefix_tokens": "shared_prefix_tokens",
    "prefix_groups": "prefix_groups",
    "turns": "turns",
    "think_time_s": "think_time",
    "trace": "trace",
    "time_scale": "time_scale",
    "schedule": "schedule",
    "seed": "seed",
    "max_concurrency": "max_concurrency",
    "arrival": "arrival",
    "ignore_eos": "ignore_eos",
    "endpoint": "endpoint",
    "slo": "slo",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=Path("runs"),
        metavar="DIR",
        help="where the sessions go (DIR/LABEL) and the comparison over them (default runs)",
    )
    parser.add_argument(
        "--headless", action="store_true", help="never wait for Enter (scripts and CI)"
    )
    parser.add_argument(
        "--probes", type=Path, metavar="FILE", help="quality probes (default: the built-in set)"
    )
    parser.add_argument("--no-quality", action="store_true", help="skip the quality probes")
    parser.add_argument(
        "--metrics-interval", type=float, default=1.0, metavar="SECONDS", help=argparse.SUPPRESS
    )
    bench.add_against_arguments(parser)
    add_load_arguments(parser)
    abab.add_arguments(parser)
    add_search_arguments(parser)
    add_trial_arguments(parser)


def repeated_options(recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The baseline's workload as command-line values (lists joined, None left out)."""
    out: dict[str, Any] = {}
    for key, option in REPEATED.items():
        value = recorded.get(key)
        if value is None or value == []:
            continue
        if key == "slo":
            value = slo_option(value)
            if not value:
                continue
        elif isinstance(value, list):
            value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        elif isinstance(value, float):
            value = f"{value:g}"
        elif not isinstance(value, bool):
            value = str(value)
        out[option] = value
    return out


def slo_option(recorded: object) -> str:
    """A recorded SLO (``{"ttft_s": 0.5, …}``) as ``--slo`` text (``ttft=500ms,…``)."""
    if not isinstance(recorded, Mapping):
        return str(recorded or "")
    parts = []
    for name in ("ttft", "tpot", "e2el"):
        v = recorded.get(f"{name}_s")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{name}={v * 1e3:g}ms")
    return ",".join(parts)


def _recorded_config(path: Path) -> dict[str, Any]:
    from infmon.journal.reader import SessionReader, is_session_dir

    if not is_session_dir(path):
        return {}
    with SessionReader(path) as reader:
        return dict(reader.config or {})


def _repeat_baseline(args: argparse.Namespace, baseline: Path) -> None:
    """Options not given on the command line take the baseline's recorded values."""
    for option, value in repeated_options(_recorded_config(baseline)).items():
        if getattr(args, option, None) is None:
            setattr(args, option, value)


def run(args: argparse.Namespace) -> int:
    if args.abab:
        return abab.run(args)
    status = run_one(args)
    if args.baseline is not None or args.headless:
        return status
    label = _wait_for_change(args)
    if label is None:
        return status
    second = copy.copy(args)
    second.label, second.session_dir, second.baseline = label, None, args.session_dir
    return run_one(second)


def _wait_for_change(args: argparse.Namespace) -> str | None:
    say(
        "change one thing on the server, then press Enter (or run `infmon method "
        f"{args.url} --label fp8 --baseline {args.session_dir}`); q then Enter stops"
    )
    try:
        line = sys.stdin.readline()
    except KeyboardInterrupt:
        return None
    if not line or line.strip().lower() in ("q", "quit"):
        return None
    say("label for the changed run (Enter: changed): ", end="")
    label = sys.stdin.readline().strip()
    return label or "changed"


def run_one(args: argparse.Namespace) -> int:
    """One run of the method: sweep, quality, reports, and against the baseline."""
    against = read_options(args.baseline, args.fail_if)
    if args.baseline:
        _repeat_baseline(args, Path(args.baseline))
    args.label = args.label or "baseline"
    args.concurrency = args.concurrency or (None if args.rate else DEFAULT_LEVELS)
    args.seed = args.seed or DEFAULT_SEED
    session_dir = Path(args.session_dir or args.runs_dir / args.label)
    args.session_dir = str(session_dir)
    bench_args = copy.copy(args)
    bench_args.json, bench_args.wide, bench_args.in_process = None, False, False
    bench_args.no_server_metrics = False
    status = bench.run_with(bench_args, against, compare=False)
    if not args.no_quality:
        _quality(args, session_dir)  # it rebuilds the reports: they hold the quality result
    _write_method_file(session_dir, args)
    if against.path is None:
        say(f"baseline recorded: {session_dir}")
        return status
    status = max(status, finish_against(against, session_dir))
    _compare_all(Path(against.path), args.runs_dir)
    return status


def _quality(args: argparse.Namespace, session_dir: Path) -> None:
    q = copy.copy(args)
    q.json, q.out, q.session_dir, q.endpoint = False, None, session_dir, None
    base = Path(args.baseline) if args.baseline else None
    q.baseline = base if base is not None and _has_quality(base) else None
    say("quality probes:")
    quality.run(q)


def _has_quality(path: Path) -> bool:
    from infmon.quality.runner import QualityError, load_baseline

    try:
        load_baseline(path)
    except QualityError:
        return False
    return True


def _write_method_file(session_dir: Path, args: argparse.Namespace) -> None:
    doc = {"label": args.label, "baseline": args.baseline, "seed": args.seed}
    try:
        write_text_atomic(session_dir / METHOD_FILE, json.dumps(doc) + "\n")
    except OSError as exc:
        raise CliError(f"cannot write {session_dir / METHOD_FILE}: {exc.strerror}") from None


def runs_of(baseline: Path, runs_dir: Path) -> list[Path]:
    """The sessions in ``runs_dir`` the method compared with ``baseline``, oldest first."""
    out = []
    for d in sorted(p for p in runs_dir.iterdir() if (p / METHOD_FILE).is_file()):
        try:
            base = json.loads((d / METHOD_FILE).read_text()).get("baseline")
        except (OSError, ValueError):
            continue
        if base and Path(base).resolve() == baseline.resolve():
            out.append(d)
    return sorted(out, key=lambda d: (d / METHOD_FILE).stat().st_mtime)


def _compare_all(baseline: Path, runs_dir: Path) -> None:
    """``runs_dir/compare.txt``/``.json``: the baseline against every run of it so far."""
    from infmon.report.runs import RunLoadError, load_run

    if not runs_dir.is_dir():
        return
    try:
        runs = [load_run(p) for p in (baseline, *runs_of(baseline, runs_dir))]
    except RunLoadError as exc:
        raise CliError(str(exc)) from None
    write_comparison(runs, runs_dir)
    say(f"comparison of {len(runs)} runs: {runs_dir / 'compare.txt'}")
