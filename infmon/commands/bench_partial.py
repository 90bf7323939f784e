"""A bench stopped mid-step (Ctrl-C, SIGTERM, SIGHUP): the step it was in still gets its row,
marked partial, with the figures of the part it measured: not dropped, and not passed off as a
full step. The journal says so too (``step_partial``), so the report marks the same row."""

from __future__ import annotations

from infmon.commands.bench_table import row
from infmon.commands.common import say
from infmon.commands.wiring import RunWiring
from infmon.engine.runner import EdgeRate, StepProgress
from infmon.journal import JournalWriter
from infmon.journal.events import StepPartial
from infmon.model.steps.ledger import StepLedger

"""The journal event naming a step a stop cut short (``index``, ``label``, ``signal``,
``measured_s``, ``planned_s``, ``phase``)."""


def partial_step(
    ledger: StepLedger,
    wiring: RunWiring,
    journal: JournalWriter,
    last: StepProgress | None,
    t_stop: float,
    signal_name: str,
    wide: bool = False,
) -> None:
    """End the step the stop cut (at ``t_stop``), settle it (the load has stopped: its
    requests all came back, the unfinished ones as cancelled), print its row and say why it
    is partial. Nothing when no step was running or its row was printed already."""
    cur = ledger.book.current
    if last is None or (cur is None and last.phase != "drain"):
        return
    if cur is not None:
        events = ledger.book.end(t_stop)
        ledger.apply(events)
        wiring.step_events(events)
    index = ledger.book.next_index - 1
    ledger.settle(index)
    result = next((r for r in ledger.settled_results() if r.index == index), None)
    if result is None:
        return
    s, spec = result.stats, last.spec
    if last.phase == "warmup" or (s.duration_s <= 0 and not (s.completed or s.failed)):
        say(
            f"  step {last.index + 1} {spec.label}: stopped by {signal_name} in its warm-up: "
            "nothing measured"
        )
        return
    journal.write(
        StepPartial(
            index, spec.label, signal_name, round(s.duration_s, 3), spec.duration_s, last.phase
        )
    )
    say(row(last.index, spec, s, EdgeRate(None, None), wide))
    say(
        "      " + partial_text(signal_name, last.phase, s.duration_s, spec.duration_s, s.cancelled)
    )


def partial_text(
    signal_name: str, phase: str, measured_s: float, planned_s: float, cancelled: int
) -> str:
    """The partial step's line, on screen and in the report."""
    if phase == "drain":
        how = f"while its last requests finished ({cancelled:,} cancelled)"
    else:
        how = f"{measured_s:.1f} s into its {planned_s:g} s"
    return (
        f"partial: stopped by {signal_name} {how}; the figures above are that part only, "
        "not a full step"
    )
