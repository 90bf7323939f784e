"""``--search`` and its options (bench; method passes them on): parsed into a ``SearchSpec``,
and the search's live output: the move before each probe, the frontier chart after it, the
verdict line and ``search.json`` at the end."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Protocol

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.config import Config
from infmon.engine.runner import EdgeRate, StepProgress, StepRunner, StepSpec
from infmon.journal import JournalWriter
from infmon.journal.events import SearchMove, SearchStarted, SearchVerdict
from infmon.journal.safefile import write_text_atomic
from infmon.model.search.level_fit import Probe
from infmon.model.search.policy import GOALS, Next, SearchSpec, Verdict
from infmon.model.search.search_json import SearchDoc, search_doc, verdict_line
from infmon.model.steps.result import StepResult
from infmon.model.steps.span import RATE
from infmon.report.frontier import frontier_chart

SEARCH_FILE = "search.json"


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("search (instead of a fixed list of levels)")
    g.add_argument(
        "--search",
        choices=GOALS,
        help="slo: the highest level meeting every --slo bound; goodput: the level of peak "
        "goodput; knee: the knee rule, bracketed (writes search.json in the session)",
    )
    g.add_argument(
        "--search-by",
        choices=("concurrency", "rate"),
        default="concurrency",
        help="search concurrent streams (default) or requests/s",
    )
    g.add_argument(
        "--search-range", metavar="LO-HI", help="levels searched (default 1-512; rate 0.5-128)"
    )
    g.add_argument(
        "--search-resolution",
        metavar="PCT",
        default="5%",
        help="stop when the bracket is this narrow (default 5%%, at least one stream)",
    )
    g.add_argument(
        "--search-budget", type=int, default=12, metavar="N", help="at most N probes (default 12)"
    )
    g.add_argument(
        "--slo-attainment",
        metavar="PCT",
        default="90%",
        help="share of a step's requests that must meet the SLO (default 90%%)",
    )
    g.add_argument(
        "--search-confidence",
        metavar="PCT",
        default="90%",
        help="re-measure a boundary level less sure than this of its side (default 90%%)",
    )


def _fraction(text: str, what: str) -> float:
    t = text.strip()
    try:
        x = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise CliError(f"{what}: not a fraction or percentage: {text!r}") from None
    if not 0 < x <= 1:
        raise CliError(f"{what}: must be above 0 and at most 100%: {text!r}")
    return x


def _range(text: str | None, rate: bool) -> tuple[float, float]:
    if text is None:
        return (0.5, 128.0) if rate else (1.0, 512.0)
    lo, sep, hi = text.partition("-")
    try:
        a, b = float(lo), float(hi)
    except ValueError:
        raise CliError(f"--search-range: use LO-HI, e.g. 1-256 (got {text!r})") from None
    if not sep or not 0 < a < b:
        raise CliError(f"--search-range: need 0 < LO < HI (got {text!r})")
    if not rate and (a != int(a) or b != int(b)):
        raise CliError("--search-range: concurrency levels are whole streams")
    return a, b


def search_from_args(args: argparse.Namespace, config: Config) -> SearchSpec | None:
    """The search the command line asks for (None: a fixed plan), checked against the run."""
    goal = getattr(args, "search", None)
    if goal is None:
        return None
    rate = args.search_by == RATE
    if goal == "slo" and config.slo.empty:
        raise CliError("--search slo needs --slo, e.g. --slo ttft=500ms,tpot=50ms")
    if goal == "knee" and rate:
        raise CliError(
            "--search knee runs in concurrency (the knee rule is per doubling of streams)"
        )
    if config.trace or config.schedule:
        raise CliError("--search sets the load level: it cannot run with --trace or --schedule")
    if args.search_budget < 2:
        raise CliError("--search-budget: at least 2 probes")
    lo, hi = _range(args.search_range, rate)
    return SearchSpec(
        goal=goal,
        lo=lo,
        hi=hi,
        integer=not rate,
        resolution=_fraction(args.search_resolution, "--search-resolution"),
        budget=args.search_budget,
        attainment=_fraction(args.slo_attainment, "--slo-attainment"),
        confidence=_fraction(args.search_confidence, "--search-confidence"),
    )


class SearchOutput:
    """What bench prints and records as a search runs."""

    def __init__(self, spec: SearchSpec, config: Config, journal: JournalWriter) -> None:
        self.spec, self.config, self.journal = spec, config, journal

    def move(self, move: Next, probes: list[Probe]) -> None:
        if probes:
            self.chart(probes)
        lvl = f"c={move.level:g}" if self.spec.integer else f"{move.level:g} req/s"
        say(f"search {len(probes) + 1}/{self.spec.budget}: {lvl} — {move.why}")
        self.journal.write(SearchMove(move.level, move.why))

    def chart(self, probes: list[Probe]) -> None:
        unit = "c=" if self.spec.integer else ""
        slo, att = self.config.slo, self.spec.attainment
        for line in frontier_chart(probes, slo, att, unit=unit, goal=self.spec.goal):
            say("  " + line)

    def verdict(self, v: Verdict, probes: list[Probe], session_dir: Path) -> SearchDoc:
        doc = search_doc(self.spec, self.config.slo, v, probes)
        self.journal.write(SearchVerdict(doc))
        path = session_dir / SEARCH_FILE
        try:
            write_text_atomic(path, json.dumps(doc, indent=2, allow_nan=False) + "\n")
        except OSError as exc:
            raise CliError(f"cannot write {path}: {exc.strerror}") from None
        say(verdict_line(self.spec, self.config.slo, v))
        return doc


class _Progress(Protocol):
    def step(self, index: int, spec: StepSpec, result: StepResult, server: EdgeRate) -> None: ...

    def tick(self, p: StepProgress) -> None: ...


async def run_search(
    runner: StepRunner,
    spec: SearchSpec,
    base: StepSpec,
    config: Config,
    journal: JournalWriter,
    session_dir: Path,
    progress: _Progress,
) -> tuple[list[tuple[StepResult, EdgeRate]], dict[str, Any]]:
    """Bench's search: a probe per move, the chart as it grows, the verdict and search.json."""
    out = SearchOutput(spec, config, journal)
    journal.write(SearchStarted(spec.goal, spec.lo, spec.hi, spec.budget))
    verdict, results, probes = await runner.search(
        spec, base, config.slo, on_step=progress.step, on_tick=progress.tick, on_move=out.move
    )
    out.chart(probes)
    return results, dict(out.verdict(verdict, probes, session_dir))
