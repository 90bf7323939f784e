"""`infmon quality URL`: greedy output-quality probes, scored, optionally against a baseline."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from pathlib import Path

from infmon.cli import CliError


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
    parser.add_argument("--model", help="model name (default: the first of /v1/models)")
    parser.add_argument("--endpoint", choices=("chat", "completions"), default="chat")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY"),
        help="bearer token (default: $OPENAI_API_KEY)",
    )
    parser.add_argument(
        "--session-dir",
        type=Path,
        help="also store the result in this session (quality.json + event)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON result to this file")


def _print_human(doc: dict) -> None:
    print(
        f"quality: {doc['correct']}/{doc['probes']} probes correct "
        f"(accuracy {doc['accuracy']:.1%}), greedy, {doc['model']} at {doc['url']}"
    )
    if doc.get("errors"):
        print(f"  {doc['errors']} probes failed to get an answer")
    for r in doc["results"]:
        if not r["correct"]:
            got = r.get("error") or repr((r.get("output") or "")[:60])
            print(f"  ✗ {r['id']}: expected {r['expect']!r}, got {got}")
    if "agreement" in doc and doc["agreement"] is not None:
        print(
            f"against baseline {doc['baseline']}: agreement {doc['agreement']:.1%} on "
            f"{doc['compared']} probes, length ratio {doc['length_ratio']:.2f}, "
            f"{len(doc['first_divergence'])} diverge"
        )


def run(args: argparse.Namespace) -> int:
    from infmon.commands.common import hide_api_key_from_process_title
    from infmon.journal import SessionDirError, check_session_dir
    from infmon.quality.probes import ProbeFileError, load_probes
    from infmon.quality.runner import QualityError, load_baseline, run_quality

    hide_api_key_from_process_title()
    try:
        if args.session_dir:  # before the probes are sent: their results must have a home
            check_session_dir(args.session_dir)
    except SessionDirError as exc:
        raise CliError(str(exc)) from None
    try:
        probes = load_probes(args.probes)
        baseline = load_baseline(args.baseline) if args.baseline else None
        doc = asyncio.run(
            run_quality(
                args.url,
                probes,
                model=args.model,
                endpoint=args.endpoint,
                api_key=args.api_key,
                baseline=baseline,
            )
        )
    except (ProbeFileError, QualityError) as exc:
        raise CliError(str(exc)) from None
    if doc["errors"] == doc["probes"]:
        first = doc["results"][0].get("error") if doc["results"] else "no probes"
        raise CliError(f"no probe got an answer from {args.url} ({first})")
    if args.session_dir:
        from infmon.journal import JournalWriter

        try:
            with JournalWriter(args.session_dir, autoflush=False) as j:
                j.write_quality(doc)
        except OSError as exc:  # another infmon recording there, or the disk refused
            raise CliError(f"quality results not recorded: {exc}") from None
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_human(doc)
    return 0
