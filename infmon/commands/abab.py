"""``infmon method URL --abab baseline,fp8``: baseline and change interleaved A-B-A-B.

Before each run the server is switched to the side's label: ``--switch-cmd 'restart-sim
{label}'`` runs the operator's command (then waits until ``/v1/models`` answers), or, without
one, the operator switches it and presses Enter. In its first round each side also runs the
quality probes and, with ``--slo``, ``--search slo`` (its SLO frontier); every round runs the
same sweep (same levels, seed and lengths) as its own session under ``RUNS/abab-A-B/``. The
end is one sentence and ``abab.json`` (``model/compare/ab_verdict.py``): speed ratio with its
interval per level, the frontier moved from X to Y, quality non-inferiority with
``--quality-margin``; ``--fail-if`` takes ``frontier<N%``, ``speed<N%`` and ``quality<N%`` rules (exit 1).

Repeated trials are the rounds: ``--repeat N`` is N A-B rounds (each side's trials stay
interleaved with the other's, so the speed interval is paired by round and a drift of the host
between rounds cancels); ``--until-ci PCT`` stops after the first round (at least 3) whose every
level's speed ratio is known within ±PCT (at most ``--repeat``/``--rounds``, default 10). A
round whose client was late at a level (bench's self-check) leaves that level's ratio with its
pair, and the verdict says so.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx

from infmon.commands import CliError, bench, quality
from infmon.commands.against import Against
from infmon.commands.common import say
from infmon.commands.trials_out import trials_from_args
from infmon.journal.safefile import write_text_atomic
from infmon.model.compare.ab_verdict import (
    AbabRuleError,
    AbabVerdict,
    FrontierMove,
    Trial,
    parse_abab_rules,
    quality_check,
    speeds,
    speeds_tight,
    verdict_doc,
)

ABAB_FILE = "abab.json"
DEFAULT_ROUNDS = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("interleaved A/B (--abab)")
    g.add_argument(
        "--abab",
        metavar="A,B",
        help="baseline and change labels, measured interleaved A-B-A-B into one verdict",
    )
    g.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help=f"A-B pairs (default {DEFAULT_ROUNDS}; --repeat N is the same: N interleaved trials a side)",
    )
    g.add_argument(
        "--switch-cmd",
        metavar="CMD",
        help="run before each side's run to switch the server ({label} is replaced), e.g. "
        "'./restart-sim {label}'; without it, switch by hand and press Enter",
    )
    g.add_argument(
        "--switch-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="wait this long for the switch command and the server to answer (default 120)",
    )
    g.add_argument(
        "--quality-margin",
        type=float,
        default=5.0,
        metavar="POINTS",
        help="quality is 'not worse' when its score's 95%% interval stays above −POINTS "
        "(default 5: the 48 built-in probes cannot show less than about 4)",
    )


def _labels(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise CliError(f"--abab: two different labels, e.g. baseline,fp8 (got {text!r})")
    for p in parts:
        if not all(c.isalnum() or c in "-_." for c in p):
            raise CliError(f"--abab: a label is letters, digits, - _ . (got {p!r})")
    return parts[0], parts[1]


def _rounds(args: argparse.Namespace) -> tuple[int, float | None]:
    """The most A-B rounds and ``--until-ci``'s target: ``--repeat N`` is N rounds."""
    opts = trials_from_args(args)
    if getattr(args, "until_ci_on", None) is not None:
        raise CliError("--until-ci-on: the A-B rounds wait on their speed ratio (--until-ci)")
    repeat, rounds = getattr(args, "repeat", None), args.rounds
    if repeat is not None and rounds is not None and repeat != rounds:
        raise CliError(
            f"--abab: --repeat {repeat} and --rounds {rounds}: the rounds are the trials, give one"
        )
    given = rounds if rounds is not None else repeat
    most = given if given is not None else opts.repeat if opts.active else DEFAULT_ROUNDS
    if most < 1:
        raise CliError("--rounds: at least 1")
    return most, opts.until_ci


def _tight(
    tok: dict[str, dict[float, list[Trial]]], a: str, b: str, target: float | None, done: int
) -> str | None:
    """``--until-ci``: why the rounds stop after ``done`` of them (None: go on)."""
    if target is None or not speeds_tight(speeds(tok[a], tok[b]), target):
        return None
    return f"every level's speed ratio within ±{target:.1%} after {done} rounds"


def run(args: argparse.Namespace) -> int:
    a, b = _labels(args.abab)
    most, until = _rounds(args)
    try:
        rules = parse_abab_rules(args.fail_if) if args.fail_if else ()
    except AbabRuleError as exc:
        raise CliError(str(exc)) from None
    if any(r.key == "frontier" for r in rules) and not args.slo:
        raise CliError("--fail-if frontier needs --slo (the frontier is searched against it)")
    if any(r.key == "quality" for r in rules) and args.no_quality:
        raise CliError("--fail-if quality cannot be judged with --no-quality")
    if args.headless and not args.switch_cmd:
        raise CliError("--abab --headless needs --switch-cmd (nobody is there to press Enter)")
    root = Path(args.session_dir) if args.session_dir else args.runs_dir / f"abab-{a}-{b}"
    root.mkdir(parents=True, exist_ok=True)
    tok: dict[str, dict[float, list[Trial]]] = {a: {}, b: {}}
    frontier: dict[str, dict[str, object] | None] = {}
    answers: dict[str, dict[str, bool]] = {}
    status, done, stop = 0, 0, None
    while done < most and stop is None:
        for label in (a, b):
            _switch(args, label)
            if done == 0:
                frontier[label] = _frontier(args, root, label)
            status = max(status, _sweep(args, root / f"{label}-r{done + 1}", label, tok[label]))
            if done == 0 and not args.no_quality:
                answers[label] = _quality(args, root / f"{label}-r1", label)
        done += 1
        stop = _tight(tok, a, b, until, done)
    if stop is not None:
        say(f"trials: {stop}")
    verdict = AbabVerdict(
        a,
        b,
        done,
        tuple(speeds(tok[a], tok[b])),
        _move(frontier.get(a), frontier.get(b)) if args.slo else None,
        quality_check(answers[a], answers[b], args.quality_margin / 100) if answers else None,
        stop,
    )
    doc = verdict_doc(verdict, rules)
    write_text_atomic(root / ABAB_FILE, json.dumps(doc, indent=2, allow_nan=False) + "\n")
    say(verdict.sentence())
    say(f"verdict: {root / ABAB_FILE}")
    failed = doc["failed_rules"]
    assert isinstance(failed, list)
    for line in failed:
        say(f"--fail-if {line}", err=True)
    return max(status, 1 if failed else 0)


def _switch(args: argparse.Namespace, label: str) -> None:
    if args.switch_cmd:
        cmd = args.switch_cmd.replace("{label}", shlex.quote(label))
        say(f"switching the server to {label}: {cmd}")
        try:
            done = subprocess.run(cmd, shell=True, timeout=args.switch_timeout, check=False)
        except subprocess.TimeoutExpired:
            raise CliError(
                f"--switch-cmd for {label} did not end in {args.switch_timeout:g} s"
            ) from None
        if done.returncode != 0:
            raise CliError(f"--switch-cmd for {label} failed (exit {done.returncode})")
    else:
        say(f"switch the server to {label}, then press Enter (q then Enter stops)")
        line = sys.stdin.readline()
        if not line or line.strip().lower() in ("q", "quit"):
            raise CliError("stopped before the A/B run ended")
    _wait_ready(args.url, args.switch_timeout)


def _wait_ready(url: str, timeout_s: float) -> None:
    """Poll ``/v1/models`` until the server answers 200 (it restarts after a switch)."""
    deadline = time.monotonic() + timeout_s
    base = url.rstrip("/")
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/v1/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise CliError(f"{url}: no answer on /v1/models within {timeout_s:g} s of the switch")


def _bench_args(args: argparse.Namespace, session: Path, label: str) -> argparse.Namespace:
    b = copy.copy(args)
    b.json = str(session.with_suffix(".bench.json"))
    b.wide, b.in_process, b.no_server_metrics = False, False, False
    b.label, b.session_dir, b.baseline, b.fail_if = label, str(session), None, None
    b.search, b.repeat, b.until_ci = None, None, None
    b.concurrency = args.concurrency or (None if args.rate else "1,4,16")
    b.seed = args.seed or "1"
    return b


def _sweep(
    args: argparse.Namespace, session: Path, label: str, into: dict[float, list[Trial]]
) -> int:
    b = _bench_args(args, session, label)
    say(f"{label}: sweep → {session}")
    status = bench.run_with(b, Against(None, None, ()), compare=False)
    doc = json.loads(Path(b.json).read_text(encoding="utf-8"))
    for s in doc["steps"]:
        level = s.get("concurrency", s.get("rate"))
        if level is not None and s.get("output_throughput_tok_s") is not None:
            trial = Trial(float(s["output_throughput_tok_s"]), s.get("client_late") is True)
            into.setdefault(float(level), []).append(trial)
    return status


def _frontier(args: argparse.Namespace, root: Path, label: str) -> dict[str, object] | None:
    if not args.slo:
        return None
    session = root / f"{label}-search"
    b = _bench_args(args, session, label)
    b.search, b.retake = "slo", None  # a search re-measures itself
    say(f"{label}: SLO frontier search → {session}")
    bench.run_with(b, Against(None, None, ()), compare=False)
    found = json.loads((session / "search.json").read_text(encoding="utf-8"))
    assert isinstance(found, dict)
    return found


def _move(a: dict[str, object] | None, b: dict[str, object] | None) -> FrontierMove:
    def side(d: dict[str, object] | None) -> tuple[float | None, bool]:
        if d is None or not isinstance(d.get("found"), dict):
            return None, False
        level = d["found"]["level"]  # type: ignore[index]
        return float(level), d.get("bound") is None  # not bracketed: at least this

    (fa, oa), (fb, ob) = side(a), side(b)
    return FrontierMove(fa, fb, oa, ob)


def _quality(args: argparse.Namespace, session: Path, label: str) -> dict[str, bool]:
    q = copy.copy(args)
    out = session.with_suffix(".quality.json")
    q.json, q.out, q.session_dir, q.endpoint, q.baseline = False, out, session, None, None
    say(f"{label}: quality probes")
    quality.run(q)
    doc = json.loads(out.read_text(encoding="utf-8"))
    return {str(r["id"]): bool(r.get("correct")) for r in doc["results"] if "error" not in r}
