"""`infmon quality URL`: greedy output-quality probes, scored, optionally against a baseline.

The client comes from the same ``Config`` as every other command (``--api-key-file``,
``INFMON_API_KEY``, ``OPENAI_API_KEY``, the config file; TLS and bounds options). Output goes
through ``say`` (control characters escaped); ``--json`` is strict JSON.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from infmon.commands import CliError
from infmon.commands.common import say, write_session_reports
from infmon.commands.load_args import add_server_arguments, config_from_args
from infmon.journal.safefile import write_text_atomic
from infmon.model.base.sanitize import clean, strict_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="SESSION_DIR|QUALITY_JSON",
        help="compare outputs with an earlier run: agreement, divergence, length",
    )
    parser.add_argument(
        "--probes",
        type=Path,
        metavar="FILE",
        help="JSONL probes with prompt, expect, optional match "
        "(exact|normalised|regex); default: the built-in set",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument(
        "--session-dir",
        type=Path,
        help="also store the result in this session (quality.json + event)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")
    add_server_arguments(parser.add_argument_group("server"), endpoint_default="chat")


def _print_human(doc: dict[str, Any]) -> None:
    say(
        f"quality: {doc['correct']}/{doc['probes']} probes correct "
        f"(accuracy {doc['accuracy']:.1%}), greedy, {doc['model']} at {doc['url']}"
    )
    if doc.get("errors"):
        say(f"  {doc['errors']} probes failed to get an answer")
    for r in doc["results"]:
        if not r["correct"]:
            got = r.get("error") or f'"{clean(r.get("output") or "", 60)}"'
            say(f'  ✗ {clean(r["id"], 80)}: expected "{clean(r["expect"], 80)}", got {got}')
    if "agreement" in doc and doc["agreement"] is not None:
        say(
            f"against baseline {doc['baseline']}: agreement {doc['agreement']:.1%} on "
            f"{doc['compared']} probes, length ratio {doc['length_ratio']:.2f}, "
            f"{len(doc['first_divergence'])} diverge"
        )


def run(args: argparse.Namespace) -> int:
    from infmon.journal import SessionDirError, check_session_dir
    from infmon.quality.probes import ProbeFileError, load_probes
    from infmon.quality.runner import QualityError, load_baseline, run_quality

    config = config_from_args(args, defaults={"endpoint": "chat"})
    try:
        if args.session_dir:  # before the probes are sent: their results must have a home
            check_session_dir(args.session_dir)
    except SessionDirError as exc:
        raise CliError(str(exc)) from None
    try:
        probes = load_probes(args.probes)
        baseline = load_baseline(args.baseline) if args.baseline else None
        doc = asyncio.run(run_quality(config, probes, baseline=baseline))
    except (ProbeFileError, QualityError) as exc:
        raise CliError(str(exc)) from None
    if doc["errors"] == doc["probes"]:
        first = doc["results"][0].get("error") if doc["results"] else "no probes"
        raise CliError(f"no probe got an answer from {config.url} ({first})")
    if args.session_dir:
        from infmon.journal import JournalWriter

        try:
            with JournalWriter(args.session_dir, autoflush=False) as j:
                j.write_quality(doc)
        except OSError as exc:  # another infmon recording there, or the disk refused
            raise CliError(f"quality results not recorded: {exc}") from None
    text = strict_json(doc, indent=2)
    if args.out:
        try:
            write_text_atomic(args.out, text + "\n")
        except OSError as exc:
            raise CliError(f"cannot write {args.out}: {exc.strerror}") from None
    if args.json:
        say(text)
    else:
        _print_human(doc)
    if args.session_dir:
        _rebuild_reports(Path(args.session_dir), err=bool(args.json))
    return 0


def _rebuild_reports(session_dir: Path, err: bool) -> None:
    """The session's reports, written when its run ended, rebuilt to hold the quality result
    (else they say "no quality run" while ``compare`` reads it)."""
    if any((session_dir / name).exists() for name in ("report.md", "report.html")):
        write_session_reports(session_dir, err=err)
