"""``--baseline RUN`` and ``--fail-if RULES`` for ``bench`` and ``method``: each step's deltas
and diagnosis under its row as the run goes, the comparison report written beside the session
at the end (``compare``'s computation, text and JSON), and the exit status by the rules."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from infmon.commands import CliError
from infmon.commands.common import say
from infmon.commands.live_baseline import load_reference
from infmon.journal.safefile import write_text_atomic
from infmon.model.base.sanitize import strict_json
from infmon.model.compare.baseline import (
    BaselineView,
    LevelComparison,
    Reference,
    compare_level,
    delta_text,
)
from infmon.model.compare.fail_if import Rule, RuleError, check, parse_rules
from infmon.model.compare.live_side import LiveBaseline
from infmon.model.compare.spec_econ import acceptance_text
from infmon.model.steps.ledger import StepLedger

if TYPE_CHECKING:
    from infmon.report.compare import Comparison
    from infmon.report.runs import Run

SHOWN = ("tok_s", "ttft_p90", "tpot_p50", "itl_p50", "e2e_p90", "goodput")
"""The deltas printed under a step's row (``compare`` shows every figure)."""


@dataclass(frozen=True)
class Against:
    """What ``--baseline`` and ``--fail-if`` asked for, read before any load is sent."""

    path: str | None
    reference: Reference | None
    rules: tuple[Rule, ...]


def read_options(baseline: str | None, fail_if: str | None) -> Against:
    try:
        rules = parse_rules(fail_if) if fail_if else ()
    except RuleError as exc:
        raise CliError(str(exc)) from None
    if rules and not baseline:
        raise CliError("--fail-if needs --baseline RUN (the run the rules compare against)")
    return Against(baseline, load_reference(baseline), rules)


def step_lines(c: LevelComparison) -> list[str]:
    """``vs baseline: tok/s 512.3 -12%* · TTFT p90 ms 45.1 +3%≈ …``, then spec decoding's
    figures and the break-even, and the diagnosis line when it does not pay."""
    if not c.in_baseline:
        return [f"      vs baseline: {c.label} not in the baseline run (not compared)"]
    cells = [f"{d.metric.label} {delta_text(d)}" for k in SHOWN if (d := c.get(k)) is not None]
    out = [f"      vs baseline: {' · '.join(cells)}  (* beyond noise, ≈ within, ? untested)"]
    s = c.spec
    if s is not None:
        out.append(
            f"      spec: {acceptance_text(s.mean_length, s.k)}; the stream saw "
            f"{s.tokens_per_chunk:.2f} tokens per chunk (ITL ≈ {s.itl_over_tpot:.2f} × TPOT)"
        )
        e = s.economics
        if e is not None:
            out.append(f"      {e.verdict()}")
            out.append(f"      {e.cost_line()}")
    return out


class StepComparer:
    """Compares a step with the baseline at its level when the step ends: its level as the
    run's step ledger keeps it (the run's wiring feeds the ledger)."""

    def __init__(self, ledger: StepLedger, reference: Reference) -> None:
        self.live = LiveBaseline(ledger)
        self.live.set_reference(reference)
        self.reference = reference

    def at_step(self, index: int, now: float) -> LevelComparison | None:
        sample = next((s for s in self.live.levels.samples(now, {}) if s.step == index), None)
        if sample is None:
            return None
        return compare_level(self.reference.levels.get(sample.level), sample)


def finish(against: Against, session_dir: Path, out_dir: Path | None = None) -> int:
    """After the run: ``compare BASELINE SESSION`` (from the recorded session, the same
    selection as its report) written as ``compare.txt`` and ``compare.json`` in ``out_dir``
    (default: the session), its explanations printed, and the ``--fail-if`` rules judged:
    0 when none fails, 1 otherwise (each failure said)."""
    from infmon.report.runs import RunLoadError, load_run

    if against.path is None:
        return 0
    out_dir = out_dir or session_dir
    try:
        runs = [load_run(Path(against.path)), load_run(session_dir)]
    except RunLoadError as exc:
        raise CliError(str(exc)) from None
    if runs[0].name == runs[1].name:
        runs[1].name = f"{runs[1].name} (2)"
    cmp = write_comparison(runs, out_dir)
    changes = "; ".join(cmp.views[0].changes) or "no server-config change seen"
    say(f"against {runs[0].name} ({against.path}): {changes}")
    for line in cmp.explanations:
        say(f"  {line}")
    say(f"comparison: {out_dir / 'compare.txt'}, {out_dir / 'compare.json'}")
    return judge(against.rules, cmp.views[0])


def judge(rules: Sequence[Rule], view: BaselineView) -> int:
    """0 when no rule fails, else 1; each failure said on stderr."""
    if not rules:
        return 0
    failures = check(rules, view)
    for f in failures:
        say(f"fail-if: {f.text}", err=True)
    if not failures:
        say(f"fail-if: no rule failed ({', '.join(r.text for r in rules)})")
    return 1 if failures else 0


def kv_line(session_dir: Path) -> str | None:
    """``KV fills at c≈14 (673 blocks × 16 tokens, 768 tokens a sequence); knee limit: …``
    from the recorded session (None when the server did not publish its cache)."""
    import math

    from infmon.report.compare import knee_with_limit
    from infmon.report.runs import RunLoadError, load_run

    try:
        run = load_run(session_dir)
    except RunLoadError:
        return None
    f = run.facts
    if not math.isfinite(f.kv_fill):
        return None
    how = (
        f"{f.kv_blocks:,.0f} blocks × {f.kv_block_size:.0f} tokens"
        if math.isfinite(f.kv_blocks) and math.isfinite(f.kv_block_size)
        else f"{f.kv_capacity_tokens:,.0f} tokens"
    )
    text = f"KV fills at c≈{f.kv_fill:,.0f} ({how}, {f.tokens_per_seq:,.0f} tokens a sequence)"
    knee = knee_with_limit(run)
    if knee and knee.get("limit_text"):
        text += f"; knee limit: {knee['limit_text']}"
    return text


def write_comparison(runs: list[Run], out_dir: Path) -> Comparison:
    """Compare ``runs`` and write ``compare.txt`` and ``compare.json`` into ``out_dir``."""
    from infmon.report.compare import compare_runs
    from infmon.report.compare_render import render_text

    cmp = compare_runs(runs)
    try:
        write_text_atomic(out_dir / "compare.txt", render_text(cmp))
        doc = strict_json(cmp.to_dict(), indent=2) + "\n"
        write_text_atomic(out_dir / "compare.json", doc)
    except OSError as exc:
        raise CliError(f"cannot write the comparison in {out_dir}: {exc.strerror}") from None
    return cmp
