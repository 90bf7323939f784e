"""`infmon compare A B [C…]`: runs side by side per step, deltas, noise test, explanations."""

from __future__ import annotations

import argparse
from pathlib import Path

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.journal.safefile import write_text_atomic
from infmon.model.base.sanitize import strict_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN",
        help="session directories, report.json files, or `vllm bench serve "
        "--save-result` files; the first is the baseline",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument("--html", type=Path, metavar="FILE", help="also write an HTML page")


def run(args: argparse.Namespace) -> int:
    from infmon.report.compare import compare_runs
    from infmon.report.compare_render import render_html, render_text
    from infmon.report.runs import RunLoadError, load_run

    if len(args.runs) < 2:
        raise CliError("compare needs at least two runs (the first is the baseline)")
    try:
        runs = [load_run(p) for p in args.runs]
    except RunLoadError as exc:
        raise CliError(str(exc)) from None
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.name] = seen.get(r.name, 0) + 1
        if seen[r.name] > 1:
            r.name = f"{r.name} ({seen[r.name]})"
    cmp = compare_runs(runs)
    if args.html:
        try:
            write_text_atomic(args.html, render_html(cmp))
        except OSError as exc:
            raise CliError(f"cannot write {args.html}: {exc.strerror}") from None
    if args.json:
        say(strict_json(cmp.to_dict(), indent=2))
    else:
        say(render_text(cmp), end="")
    return 0
